// What every Sextant binary sets before it parses flags or starts a thread.
#ifndef SEXTANT_COMMON_PROCESS_SETUP_H_
#define SEXTANT_COMMON_PROCESS_SETUP_H_

namespace sextant {

// Called first thing in main:
// - absl::Mutex's lock-order check (on in Debian's build) would abort the process on a
//   suspected cycle, gRPC's own mutexes included; the services finish calls under their lock,
//   as they did with std::mutex. It is turned off; a real deadlock still shows as one.
// - GiveFreedMemoryBackPromptly (common/mapped_floats.h): a large model's message buffers go
//   back to the system once freed (the orchestrator 1.9x -> 1.6x a 256 MB model, aggregators
//   1.7-1.9x -> 1.4-1.6x; bench/federated/RESULTS.md).
// - gRPC resolves names as the system does (GRPC_DNS_RESOLVER=native: getaddrinfo, so
//   /etc/hosts first), unless the environment already chooses: its own resolver also asks the
//   DNS servers for an IPv6 address a hosts file does not list, and where those servers cannot
//   be reached (a region's network namespace) it waited for them to time out, so that regions
//   joined 80 to 94 s late.
// - umask 077: whatever the process creates is its user's alone (files 0600, folders 0700), run
//   directories included; the processes it starts (workers, trials) inherit it.
void SetUpProcess();

// The one signal set-up of the binaries: on_interrupt handles SIGINT, and SIGTERM too unless
// on_terminate is given (a worker checkpoints on SIGTERM, a cloud's spot notice); SIGPIPE is
// ignored, so that a closed pipe or socket is an error a write returns, not the process's end.
// Handlers must be async-signal-safe (set an atomic).
void InstallSignalHandlers(void (*on_interrupt)(int), void (*on_terminate)(int) = nullptr);

}  // namespace sextant

#endif  // SEXTANT_COMMON_PROCESS_SETUP_H_
