#ifndef SEXTANT_TESTS_ORCHESTRATOR_SLURM_CLUSTER_H_
#define SEXTANT_TESTS_ORCHESTRATOR_SLURM_CLUSTER_H_

#include <string>
#include <vector>

#include "tests/orchestrator/net_namespaces.h"

namespace sextant::testing {

// A real Slurm cluster private to one test: munged with a key it generates, slurmctld and
// slurmd from Debian's slurm-wlm, each with its own config, ports, state, spool, pid and log
// files under a temp dir. One node on loopback (8 CPUs), or several (2 CPUs each), each node's
// slurmd in a network namespace of its own on one bridge (NetNamespaces::Wiring::kBridge),
// so that a job runs on a host of its own, with its own address, as on a real cluster; the
// controller then listens on the host's address on that bridge. Two partitions share the
// nodes: `ondemand` (the default, higher priority tier, never preempted) and `spot` (lower
// tier, jobs preempted by requeue). Job completions (with their NodeList) are logged to
// jobcomp_path() (jobcomp/filetxt), since there is no accounting database for sacct. Needs
// root (SlurmUser and SlurmdUser are root). Not thread-safe.
class SlurmCluster {
 public:
  SlurmCluster() = default;
  // Cancels every job and stops the daemons (slurmd, slurmctld, munged), waiting for each.
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Starts the daemons and waits until the node is idle in both partitions. Returns "" on
  // success, else why the cluster cannot run here (not root, a binary missing, a daemon that
  // did not start: with the tail of its log); the caller skips the test with that reason.
  // `cred_expire_seconds` is the job credentials' lifetime (AuthInfo cred_expire), which is also
  // how long Slurm holds a requeued job back before it may start again.
  std::string Start(const std::string& dir, int nodes = 1, int cred_expire_seconds = 120);

  // Where the nodes reach this host: 127.0.0.1 with one node, else its bridge address.
  std::string host_address() const;
  // Node i's name (sextant-node with one node, else node0, node1, ...) and address.
  std::string node_name(int i) const;
  std::string node_address(int i) const;

  // The value of SLURM_CONF for commands that talk to this cluster.
  const std::string& conf() const { return conf_; }
  // One line per finished job: "JobId=N ... Name=... JobState=... Partition=...".
  std::string jobcomp_path() const { return dir_ + "/log/jobcomp.txt"; }
  // Cancels every job and waits (up to timeout_seconds) until the queue is empty.
  void CancelAll(double timeout_seconds);

 private:
  std::string WaitForNode(double timeout_seconds);
  void Stop();

  std::string dir_;
  int nodes_ = 1;
  NetNamespaces net_;  // the nodes' hosts, with more than one node
  std::string conf_;
  std::string munge_socket_;
  std::vector<std::string> pid_files_;  // in start order; stopped in reverse
  bool started_ = false;
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_ORCHESTRATOR_SLURM_CLUSTER_H_
