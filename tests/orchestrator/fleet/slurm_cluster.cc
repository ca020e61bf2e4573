#include "tests/orchestrator/fleet/slurm_cluster.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/proc_file.h"
#include "tests/orchestrator/test_util.h"

namespace sextant::testing {
namespace {

std::string ShortHostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

std::string Tail(const std::string& path, size_t bytes = 1500) {
  std::string text = ReadFile(path);
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

// The pid in a daemon's pid file, when that process still runs the named daemon.
pid_t LivePid(const std::string& pid_file) {
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &pid) || pid <= 0) return 0;
  std::string cmdline = ReadProcFile(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string daemon = std::filesystem::path(pid_file).stem().string();  // "slurmd-node0"
  daemon = daemon.substr(0, daemon.find('-'));                           // "slurmd"
  return cmdline.find(daemon) == std::string::npos ? 0 : pid;
}

}  // namespace

std::string SlurmCluster::host_address() const {
  return nodes_ == 1 ? "127.0.0.1" : net_.HostEnd(0);
}

std::string SlurmCluster::node_name(int i) const {
  return nodes_ == 1 ? "sextant-node" : absl::StrCat("node", i);
}

std::string SlurmCluster::node_address(int i) const {
  return nodes_ == 1 ? "127.0.0.1" : net_.Inside(i);
}

std::string SlurmCluster::Start(const std::string& dir, int nodes, int cred_expire_seconds) {
  if (geteuid() != 0) return "the Slurm daemons run as root here, and this test is not root";
  for (const char* bin : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                          "/usr/bin/sbatch", "/usr/bin/squeue", "/usr/bin/scancel"}) {
    if (access(bin, X_OK) != 0) {
      return absl::StrCat(bin, " is missing (scripts/install-deps installs slurm-wlm and munge)");
    }
  }
  dir_ = dir;
  nodes_ = nodes;
  if (nodes_ > 1) {
    if (std::string why = net_.Create(nodes_, NetNamespaces::Wiring::kBridge); !why.empty()) {
      return why;
    }
  }
  started_ = true;
  for (const char* sub : {"state", "log"}) std::filesystem::create_directories(dir_ + "/" + sub);
  for (int i = 0; i < nodes_; ++i)
    std::filesystem::create_directories(dir_ + "/spool/" + node_name(i));
  // A fresh munge key: 1 KiB of random bytes, readable by its owner only.
  std::string key(1024, '\0');
  std::ifstream("/dev/urandom", std::ios::binary)
      .read(key.data(), static_cast<std::streamsize>(key.size()));
  WriteFile(dir_ + "/munge.key", key);
  chmod((dir_ + "/munge.key").c_str(), 0600);
  munge_socket_ = dir_ + "/munge.sock";
  pid_files_ = {dir_ + "/munged.pid"};
  CommandOutput m =
      RunProcess({"/usr/sbin/munged", "--force", "--socket", munge_socket_, "--key-file",
                  dir_ + "/munge.key", "--log-file", dir_ + "/log/munged.log", "--pid-file",
                  dir_ + "/munged.pid", "--seed-file", dir_ + "/munged.seed"},
                 30);
  if (m.exit_code != 0)
    return absl::StrCat("munged did not start: ", m.err, Tail(dir_ + "/log/munged.log"));

  const int ctld_port = FreePort(), slurmd_port = FreePort();
  // One line per node, and the partitions over all of them.
  std::string node_lines, node_list;
  for (int i = 0; i < nodes_; ++i) {
    absl::StrAppend(&node_lines, "NodeName=", node_name(i), " NodeAddr=", node_address(i),
                    nodes_ == 1 ? " NodeHostname=localhost CPUs=8" : " CPUs=2", " State=UNKNOWN\n");
    absl::StrAppend(&node_list, i == 0 ? "" : ",", node_name(i));
  }
  conf_ = dir_ + "/slurm.conf";
  WriteFile(conf_,
            absl::StrCat(
                R"(ClusterName=sextant-test
SlurmctldHost=)",
                ShortHostname(), "(", host_address(), R"()
SlurmctldPort=)",
                ctld_port, "\nSlurmdPort=", slurmd_port, R"(
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=)",
                munge_socket_, ",cred_expire=", cred_expire_seconds, R"(
SlurmUser=root
SlurmdUser=root
StateSaveLocation=)",
                dir_, "/state\nSlurmdSpoolDir=", dir_, "/spool/%n\nSlurmctldPidFile=", dir_,
                "/slurmctld.pid\nSlurmdPidFile=", dir_, "/slurmd-%n.pid\nSlurmctldLogFile=", dir_,
                "/log/slurmctld.log\nSlurmdLogFile=", dir_, R"(/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=)",
                jobcomp_path(), R"(
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
)",
                node_lines, "PartitionName=ondemand Nodes=", node_list,
                " Default=YES PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP\n"
                "PartitionName=spot Nodes=",
                node_list, " PriorityTier=1 PreemptMode=REQUEUE MaxTime=INFINITE State=UP\n"));
  const std::string env = absl::StrCat("SLURM_CONF=", conf_);
  pid_files_.push_back(dir_ + "/slurmctld.pid");
  CommandOutput c = RunProcess({"env", env, "/usr/sbin/slurmctld", "-i"}, 30);
  if (c.exit_code != 0) {
    return absl::StrCat("slurmctld did not start: ", c.err, Tail(dir_ + "/log/slurmctld.log"));
  }
  for (int i = 0; i < nodes_; ++i) {
    const std::string node = node_name(i);
    pid_files_.push_back(absl::StrCat(dir_, "/slurmd-", node, ".pid"));
    std::vector<std::string> argv = {"env", env, "/usr/sbin/slurmd", "-N", node};
    CommandOutput d = RunProcess(nodes_ == 1 ? argv : net_.NetworkOnly(i, argv), 30);
    if (d.exit_code != 0) {
      return absl::StrCat("slurmd of ", node, " did not start: ", d.err,
                          Tail(absl::StrCat(dir_, "/log/slurmd-", node, ".log")));
    }
  }
  return WaitForNode(60);
}

std::string SlurmCluster::WaitForNode(double timeout_seconds) {
  std::string last;
  // Every node idle in both partitions: one line each.
  const bool up = WaitFor(
      [&] {
        CommandOutput s = RunProcess(
            {"env", absl::StrCat("SLURM_CONF=", conf_), "sinfo", "-h", "-N", "-o", "%N %P %t"}, 10);
        last = s.out + s.err;
        int idle = 0;
        for (absl::string_view line : absl::StrSplit(s.out, '\n')) {
          if (absl::EndsWith(line, " idle")) ++idle;
        }
        return s.exit_code == 0 && idle == 2 * nodes_;
      },
      timeout_seconds);
  if (up) return "";
  std::string slurmd;
  for (int i = 0; i < nodes_; ++i) {
    absl::StrAppend(&slurmd, " slurmd of ", node_name(i), ": ",
                    Tail(absl::StrCat(dir_, "/log/slurmd-", node_name(i), ".log"), 600));
  }
  return absl::StrCat("the Slurm nodes did not come up (sinfo: ", last,
                      "); slurmctld: ", Tail(dir_ + "/log/slurmctld.log", 800), slurmd);
}

void SlurmCluster::CancelAll(double timeout_seconds) {
  if (conf_.empty()) return;
  const std::string env = absl::StrCat("SLURM_CONF=", conf_);
  RunProcess({"env", env, "scancel", "--user=root"}, 10);
  WaitFor(
      [&] {
        CommandOutput q = RunProcess({"env", env, "squeue", "-h", "-o", "%i"}, 10);
        return q.exit_code != 0 || absl::StripAsciiWhitespace(q.out).empty();
      },
      timeout_seconds);
}

void SlurmCluster::Stop() {
  if (!started_) return;
  started_ = false;
  if (!pid_files_.empty() && pid_files_.size() >= 2 && LivePid(pid_files_[1]) != 0) CancelAll(20);
  for (auto it = pid_files_.rbegin(); it != pid_files_.rend(); ++it) {
    const pid_t pid = LivePid(*it);
    if (pid == 0) continue;
    kill(pid, SIGTERM);
    if (!WaitFor([&] { return LivePid(*it) == 0; }, 10)) kill(pid, SIGKILL);
    WaitFor([&] { return LivePid(*it) == 0; }, 5);
  }
}

SlurmCluster::~SlurmCluster() { Stop(); }

}  // namespace sextant::testing
