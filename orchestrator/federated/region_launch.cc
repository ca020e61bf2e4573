#include "orchestrator/federated/region_launch.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/ids.h"
#include "common/read_file.h"
#include "common/status_macros.h"
#include "rpc/certificates.h"
#include "rpc/identity.h"

namespace sextant {

namespace {

// Where a participant's own certificate goes: its region's aggregator (index -1) or client.
std::string ParticipantTlsDir(const RegionLaunch& l, const std::string& region, int index) {
  return index < 0 ? absl::StrCat(l.fed_dir, "/tls/", region, "/aggregator")
                   : absl::StrCat(l.fed_dir, "/tls/", region, "/client-", index);
}

// A participant dials and serves with its own certificate (IssueParticipantCertificates), or
// on loopback with the run's secret.
void AddCredentials(const RegionLaunch& l, std::vector<std::string>* argv,
                    const std::string& region, int index) {
  if (l.tls_dir.empty()) {
    argv->insert(argv->end(), {"--secret-file", l.secret_file});
    return;
  }
  argv->insert(argv->end(), {"--tls-dir", ParticipantTlsDir(l, region, index), "--tls-name",
                             index < 0 ? "aggregator" : absl::StrCat(index)});
  // A client dials its aggregator on loopback, a name no aggregator certificate carries (it
  // could then pose as the orchestrator): it admits the one identity the run issued instead.
  if (index >= 0) {
    argv->insert(argv->end(), {"--server-identity",
                               IdentityUri(PeerIdentity{Role::kAggregator, region, "aggregator"})});
  }
}

// The HOST:PORT region `region`'s aggregator wrote to `address_file` within 60 s, and its port;
// empty and 0 if none.
std::pair<std::string, int> AwaitAddress(const RegionLaunch& l, const std::string& address_file) {
  const absl::Time until = l.clock->Now() + absl::Seconds(60);
  while (l.clock->Now() < until) {
    const std::string address(
        absl::StripAsciiWhitespace(ReadFileIfPresent(address_file).value_or("")));
    int port = 0;
    const size_t colon = address.rfind(':');
    if (colon != std::string::npos && absl::SimpleAtoi(address.substr(colon + 1), &port) &&
        port > 0) {
      return {address, port};
    }
    l.clock->SleepFor(absl::Milliseconds(50));
  }
  return {"", 0};
}

}  // namespace

absl::Status IssueParticipantCertificates(const RegionLaunch& l, ServerSecurity* security) {
  for (const v1::FederatedRegion& r : l.spec->federation().regions()) {
    if (l.hand_joins->Of(r.name())) continue;
    SEXTANT_ASSIGN_OR_RETURN(
        std::string fingerprint,
        IssueParticipantDirectory(l.tls_dir, ParticipantTlsDir(l, r.name(), -1),
                                  PeerIdentity{Role::kAggregator, r.name(), "aggregator"}));
    security->enrolled.insert(fingerprint);
    std::vector<std::string> clients;
    for (int i = 0; i < r.clients(); ++i) {
      SEXTANT_ASSIGN_OR_RETURN(
          clients.emplace_back(),
          IssueParticipantDirectory(l.tls_dir, ParticipantTlsDir(l, r.name(), i),
                                    PeerIdentity{Role::kClient, r.name(), absl::StrCat(i)}));
    }
    SEXTANT_RETURN_IF_ERROR(
        EnrollParticipants(l.tls_dir, ParticipantTlsDir(l, r.name(), -1), clients));
  }
  return absl::OkStatus();
}

std::vector<std::string> AggregatorRunFlags(const std::string& region,
                                            const std::string& experiment_id, size_t model_size) {
  return {"--region",    region,         "--experiment-id",
          experiment_id, "--model-size", absl::StrCat(model_size)};
}

absl::Status LaunchRegions(const RegionLaunch& l, const std::string& tier_target,
                           Participants& participants) {
  const v1::Federation& fed = l.spec->federation();
  // Each region's files sit in regions/: no region name can meet the run's own folders.
  std::filesystem::create_directories(l.fed_dir + "/regions");
  auto address_file = [&](const std::string& region) {
    return absl::StrCat(l.fed_dir, "/regions/", region, ".address");
  };
  for (const v1::FederatedRegion& r : fed.regions()) {
    if (l.hand_joins->Of(r.name())) continue;
    std::filesystem::remove(address_file(r.name()));
    // It serves its clients on its host's address toward the global tier: wherever its
    // provider puts it (a Slurm node), its clients reach it as it reaches the orchestrator.
    std::vector<std::string> argv = {l.worker_binary,
                                     "--role",
                                     "aggregator",
                                     "--connect",
                                     tier_target,
                                     "--listen",
                                     "auto:0",
                                     "--work-dir",
                                     absl::StrCat(l.fed_dir, "/regions/", r.name()),
                                     "--address-file",
                                     address_file(r.name()),
                                     "--startup-wait",
                                     absl::StrCat(l.startup_wait_seconds),
                                     "--exit-with-parent"};
    AddCredentials(l, &argv, r.name(), -1);
    argv.insert(argv.end(), {"--spec", l.spec_file});
    const std::vector<std::string> flags =
        AggregatorRunFlags(r.name(), l.experiment_id, l.model_size);
    argv.insert(argv.end(), flags.begin(), flags.end());
    participants.Launch(argv, absl::StrCat("aggregator-", r.name(), ".log"),
                        absl::StrCat("aggregator ", r.name()), r.name(), /*aggregator=*/true);
  }
  int global_index = 0;  // the clients' order of federation.client_data_dirs
  for (const v1::FederatedRegion& r : fed.regions()) {
    if (l.hand_joins->Of(r.name())) {
      global_index += r.clients();
      continue;
    }
    const auto [address, port] = AwaitAddress(l, address_file(r.name()));
    participants.SetRegionPort(r.name(), port);
    if (port == 0) {
      return absl::UnavailableError(absl::StrCat("the aggregator of region ", r.name(),
                                                 " did not start; see ", l.logs_dir, "/aggregator-",
                                                 r.name(), ".log"));
    }
    for (int i = 0; i < r.clients(); ++i) {
      std::vector<std::string> argv = {l.worker_binary,
                                       "--role",
                                       "client",
                                       "--region",
                                       r.name(),
                                       "--index",
                                       absl::StrCat(i),
                                       "--connect",
                                       address,
                                       "--address-file",
                                       address_file(r.name()),
                                       "--experiment-id",
                                       l.experiment_id,
                                       "--spec",
                                       l.spec_file,
                                       "--threads",
                                       "1",
                                       "--work-dir",
                                       absl::StrCat(l.fed_dir, "/client-", r.name(), "-", i),
                                       "--exit-with-parent"};
      AddCredentials(l, &argv, r.name(), i);
      if (global_index < fed.client_data_dirs_size()) {
        argv.insert(argv.end(), {"--data-dir", fed.client_data_dirs(global_index)});
      }
      ++global_index;
      participants.Launch(argv, absl::StrCat("client-", r.name(), "-", i, ".log"),
                          absl::StrCat("client ", ClientId(r.name(), i)), r.name(),
                          /*aggregator=*/false);
    }
  }
  return absl::OkStatus();
}

}  // namespace sextant
