// Multi-region deployment for real: regions are Linux network namespaces, each joined to the
// host by its own veth link. The orchestrator runs in one namespace; the workers, regional
// aggregators and clients of three regions run in three others and reach it only through a
// userspace relay per region that adds 50 ms of latency each way and loses 1% of segments
// (tests/fakes/tcp_proxy.h; the kernel here has no netem). The search's orchestrator listens on
// its namespace's non-loopback address, so it must serve TLS with authentication (certificates
// from `sextant certs init`). Needs root and `ip` (iproute2); skipped with the reason otherwise.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/run_dir.h"
#include "tests/fakes/tcp_proxy.h"
#include "tests/orchestrator/net_namespaces.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using testing::MakeTempDir;
using testing::NetNamespaces;
using testing::ReadFile;
using testing::RunProcess;
using testing::TcpProxy;
using testing::TcpProxyOptions;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";
constexpr int kRegions = 3;
constexpr char kOrchestratorName[] = "orchestrator.sextant.test";

// Namespace 0 for the orchestrator and 1..kRegions for the regions, each on a veth link of its
// own (NetNamespaces::Wiring::kLinks): nothing routes between namespaces, so a region reaches
// the orchestrator only through a relay listening on its link's host end.
class Regions : public NetNamespaces {
 public:
  // Empty when created; otherwise why namespaces cannot be used here (the test skips).
  std::string Create() {
    if (std::string why = NetNamespaces::Create(kRegions + 1, Wiring::kLinks); !why.empty()) {
      return why;
    }
    // `ip netns exec` mounts /etc/netns/NS/hosts over /etc/hosts: in a region, the
    // orchestrator's name is its relay's address.
    for (int i = 0; i <= kRegions; ++i) {
      WriteFile(absl::StrCat("/etc/netns/", Namespace(i), "/hosts"),
                absl::StrCat("127.0.0.1 localhost\n", HostEnd(i), " ", kOrchestratorName, "\n"));
    }
    return "";
  }
};

// The network namespace a process of namespace path `path` lives in, as /proc shows it.
std::string NamespaceId(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  return absl::StrCat("net:[", st.st_ino, "]");
}

// The relay the regions are joined through: an echo round trip pays the latency both ways, and a
// lost segment stalls its stream by a retransmission timeout.
TEST(LossyRelayTest, AddsLatencyEachWayAndStallsOnLoss) {
  int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(server, 4), 0);
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread echo([server] {
    for (int connection = 0; connection < 2; ++connection) {
      int c = accept(server, nullptr, nullptr);
      char buf[256];
      for (ssize_t n; (n = read(c, buf, sizeof(buf))) > 0;) (void)!send(c, buf, n, MSG_NOSIGNAL);
      close(c);
    }
  });
  auto round_trip_ms = [&](TcpProxyOptions o, int times) {
    o.upstream_port = ntohs(addr.sin_port);
    auto relay = TcpProxy::Start(o);
    EXPECT_TRUE(relay.ok()) << relay.status();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>((*relay)->port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
    const auto start = std::chrono::steady_clock::now();
    char c = 'x';
    for (int i = 0; i < times; ++i) {
      EXPECT_EQ(write(fd, &c, 1), 1);
      EXPECT_EQ(read(fd, &c, 1), 1);
    }
    close(fd);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() /
           times;
  };
  TcpProxyOptions delayed;
  delayed.latency_ms = 50;
  const double rtt = round_trip_ms(delayed, 5);
  EXPECT_GE(rtt, 100);
  EXPECT_LT(rtt, 400);
  TcpProxyOptions lossy = delayed;
  lossy.loss = 1;  // every segment lost once: each direction also waits the 200 ms timeout
  EXPECT_GE(round_trip_ms(lossy, 1), 500);
  echo.join();
  close(server);
}

// Three regions of two clients, three rounds of secure aggregation with hide_region_sums.
std::string SecureFederation(const std::string& name) {
  return absl::StrCat("name: ", name, "\n", R"(objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: r1, clients: 2}, {name: r2, clients: 2}, {name: r3, clients: 2}]
  rounds: 3
  local_lr: 0.05
  min_clients: 6
  round_deadline: 120s
  seed: 4
  examples_per_client: 800
  validation_examples: 500
  secure_aggregation: true
  hide_region_sums: true
)");
}

class MultiRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = regions_.Create();
    SEXTANT_REQUIRE_COMPONENT(why.empty(), why);
    dir_ = MakeTempDir("regions");
  }

  // One relay per region: its link's host end, port `port`, to the orchestrator.
  void StartRelays(int port, const std::string& upstream_host, const std::string& upstream_netns) {
    for (int i = 1; i <= kRegions; ++i) {
      TcpProxyOptions o;
      o.listen_host = regions_.HostEnd(i);
      o.listen_port = port;
      o.upstream_host = upstream_host;
      o.upstream_port = port;
      o.upstream_netns = upstream_netns;
      o.latency_ms = 50;
      o.loss = 0.01;
      o.seed = static_cast<uint64_t>(i);
      auto relay = TcpProxy::Start(o);
      ASSERT_TRUE(relay.ok()) << relay.status();
      relays_.push_back(*std::move(relay));
    }
  }

  Regions regions_;
  std::string dir_;
  std::vector<std::unique_ptr<TcpProxy>> relays_;
};

// A search on static pools, one per region: each region's worker connects over TLS with its
// certificate and token through its relay, and the trials run inside the regions.
TEST_F(MultiRegionTest, SearchCompletesWithWorkersInThreeRegionsOverTlsThroughLossyLinks) {
  // docs/deployment.md's flow: the orchestrator's certificate names the host the workers dial, and
  // each worker host gets its own certificate.
  const std::string certs = dir_ + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs, "--san", kOrchestratorName});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  for (int i = 1; i <= kRegions; ++i) {
    auto issued = RunProcess({kSextant, "certs", "issue", certs, absl::StrCat("w-r", i), "--role",
                              "worker", "--region", absl::StrCat("r", i), "--enroll"});
    ASSERT_EQ(issued.exit_code, 0) << issued.err;
  }

  const std::string log = dir_ + "/evaluations.log";
  WriteFile(dir_ + "/objective.sh", absl::StrCat(R"SH(#!/bin/sh
echo "$SEXTANT_TRIAL_ID $(readlink /proc/self/ns/net)" >> )SH",
                                                 log, R"SH(
sleep 0.3
echo "step=1 loss=$SEXTANT_TRIAL_ID"
)SH"));
  std::string catalog =
      "regions: [r1, r2, r3]\ninstances: {cpu.1x: {gpus: 0, cpus: 1}}\n"
      "billing: {increment: 1s, minimum: 1s}\noffers:\n";
  std::string pools;
  for (int i = 1; i <= kRegions; ++i) {
    absl::StrAppend(&catalog, "  - {region: r", i,
                    ", instance: cpu.1x, market: on_demand, "
                    "price_per_hour: 3.6}\n");
    absl::StrAppend(&pools, "    - {name: p", i, ", region: r", i,
                    ", instance: cpu.1x, market: on_demand, max_instances: 1}\n");
  }
  WriteFile(dir_ + "/catalog.yaml", catalog);
  WriteFile(dir_ + "/exp.yaml", absl::StrCat(R"(name: regions-hpo
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: random, seed: 2, max_trials: 12, max_concurrent: 3}
trial:
  command: [sh, )",
                                             dir_, R"(/objective.sh]
resources:
  provider: static
  catalog: )",
                                             dir_, R"(/catalog.yaml
  pools:
)",
                                             pools));
  const std::string listen = absl::StrCat(regions_.Inside(0), ":7000");

  // Without TLS and authentication the orchestrator will not listen there at all.
  auto refused = RunProcess(regions_.In(0, {kSextant, "run", dir_ + "/exp.yaml", "--run-dir",
                                            dir_ + "/refused", "--listen", listen}),
                            60);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("refusing to listen"), std::string::npos) << refused.err;

  StartRelays(7000, regions_.Inside(0), "");
  BackgroundProcess run(regions_.In(0, {kSextant, "run", dir_ + "/exp.yaml", "--run-dir",
                                        dir_ + "/run", "--listen", listen, "--tls-dir", certs}));
  ASSERT_TRUE(run.WaitForOutput("start workers with", 60)) << run.out() << run.err();
  std::vector<std::unique_ptr<BackgroundProcess>> workers;
  for (int i = 1; i <= kRegions; ++i) {
    workers.push_back(std::make_unique<BackgroundProcess>(
        regions_.In(i, {kWorker, "--connect", absl::StrCat(kOrchestratorName, ":7000"), "--region",
                        absl::StrCat("r", i), "--pool", absl::StrCat("p", i), "--tls-dir", certs,
                        "--tls-name", absl::StrCat("w-r", i)})));
  }
  ASSERT_EQ(run.Wait(240), 0) << run.out() << run.err();
  for (int i = 0; i < kRegions; ++i) {
    EXPECT_EQ(workers[i]->Wait(60), 0) << "region " << i + 1 << ": " << workers[i]->err();
  }

  auto results = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), 12u);
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["value"], t["id"]) << t.dump();
  }
  // Trials ran inside the region namespaces (never the orchestrator's), in every region.
  std::map<std::string, int> region_of;
  for (int i = 0; i <= kRegions; ++i) region_of[NamespaceId(regions_.Path(i))] = i;
  std::map<int, int> per_region;
  std::istringstream lines(ReadFile(log));
  std::string id, ns;
  while (lines >> id >> ns) {
    ASSERT_TRUE(region_of.count(ns)) << "trial " << id << " ran in " << ns;
    ++per_region[region_of[ns]];
  }
  EXPECT_EQ(per_region[0], 0);
  for (int i = 1; i <= kRegions; ++i) {
    EXPECT_GE(per_region[i], 1) << "region " << i;
    EXPECT_GT(relays_[i - 1]->bytes_relayed(), 0) << "region " << i;
  }
  int64_t lost = 0;
  for (const auto& r : relays_) lost += r->segments_lost();
  std::cout << "trials per region: " << per_region[1] << " " << per_region[2] << " "
            << per_region[3] << "; segments lost: " << lost << "\n";
}

// A secure federated run over mTLS with its regional aggregators and clients in the region
// namespaces: the orchestrator launches them through a `sextant-worker` beside its binary that
// starts each one in its region's namespace and points the aggregators at the orchestrator's
// name, which in a region is its relay. Every participant has its own certificate; the
// orchestrator's names the host they dial. The orchestrator listens on its namespace's
// loopback and the relays connect from inside that namespace.
TEST_F(MultiRegionTest, FederatedRunCompletesWithAggregatorsAndClientsInThreeRegions) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string bin = dir_ + "/bin";
  std::filesystem::create_directories(bin);
  std::filesystem::copy_file(kSextant, bin + "/sextant");
  std::string cases;
  for (int i = 1; i <= kRegions; ++i) {
    absl::StrAppend(&cases, "  r", i, ") ns=", regions_.Namespace(i), "; up=", kOrchestratorName,
                    ":7001;;\n");
  }
  WriteFile(bin + "/sextant-worker",
            absl::StrCat(R"SH(#!/bin/bash
args=("$@"); role=; region=
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case "${args[i]}" in --role) role=${args[i+1]};; --region) region=${args[i+1]};; esac
done
# The global tier's evaluator runs beside the orchestrator.
if [ "$role" = evaluator ]; then exec )SH",
                         kWorker, R"SH( "${args[@]}"; fi
case "$region" in
)SH",
                         cases, R"SH(  *) echo "no namespace for region $region" >&2; exit 2;;
esac
if [ "$role" = aggregator ]; then
  for ((i = 0; i + 1 < ${#args[@]}; i++)); do
    [ "${args[i]}" = --connect ] && args[i+1]=$up
  done
fi
exec ip netns exec "$ns" )SH",
                         kWorker, R"SH( "${args[@]}"
)SH"));
  chmod((bin + "/sextant-worker").c_str(), 0755);
  WriteFile(dir_ + "/fed.yaml", SecureFederation("regions-fl"));
  const std::string certs = dir_ + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs, "--san", kOrchestratorName});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  StartRelays(7001, "127.0.0.1", regions_.Path(0));
  BackgroundProcess run(
      regions_.In(0, {bin + "/sextant", "run", dir_ + "/fed.yaml", "--run-dir", dir_ + "/run",
                      "--listen", "127.0.0.1:7001", "--tls-dir", certs}));
  ASSERT_EQ(run.Wait(400), 0) << run.out() << run.err();

  auto table = RoundsTable::Open(RunDir::DbPath(dir_ + "/run"));
  ASSERT_TRUE(table.ok()) << table.status();
  auto rows = table->Load();
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<int64_t, std::set<std::string>> regions_by_round;
  std::map<int64_t, RoundRow> global;
  for (const RoundRow& r : *rows) {
    regions_by_round[r.round].insert(r.region);
    if (r.region.empty()) global[r.round] = r;
  }
  ASSERT_EQ(global.size(), 3u) << run.out();
  for (int64_t round = 1; round <= 3; ++round) {
    EXPECT_EQ(global[round].clients, 6) << "round " << round;
    // hide_region_sums: the orchestrator learns only the total, no region's own sum.
    EXPECT_EQ(regions_by_round[round], (std::set<std::string>{""}));
  }
  EXPECT_GT(global[3].accuracy, 0.4) << "chance is 0.1";
  // Each region's aggregator reached the orchestrator only through its relay, and the global
  // model (about 50 KB) went through each one every round.
  for (int i = 1; i <= kRegions; ++i) {
    EXPECT_GE(relays_[i - 1]->connections(), 1) << "region " << i;
    EXPECT_GT(relays_[i - 1]->bytes_relayed(), 3 * 50000) << "region " << i;
  }
  int64_t lost = 0;
  for (const auto& r : relays_) lost += r->segments_lost();
  std::cout << "relayed per region:";
  for (const auto& r : relays_) std::cout << " " << r->bytes_relayed();
  std::cout << " bytes; segments lost: " << lost << "\n";
  // The participants ran inside their regions.
  for (int i = 1; i <= kRegions; ++i) {
    const std::string agg = ReadFile(absl::StrCat(dir_, "/run/logs/aggregator-r", i, ".log"));
    EXPECT_EQ(agg.find("no namespace"), std::string::npos) << agg;
  }
}

// The deployment of docs/deployment.md with participants started by hand: every host gets a
// certificate of its own from `sextant certs issue`, the orchestrator is run with
// --external-participants, and each region's aggregator and clients are started in their region
// with `--join`, taking the experiment from upstream by their certificates. Clients are named
// for their sites, not by index: their aggregator gives each a place. A client certificate
// asking the orchestrator for an aggregator's plan is refused.
TEST_F(MultiRegionTest, FederatedRunWithParticipantsStartedByHandOnTheirHosts) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string certs = dir_ + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs, "--san", kOrchestratorName});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const char* kSites[] = {"site-a", "site-b"};
  for (int i = 1; i <= kRegions; ++i) {
    const std::string region = absl::StrCat("r", i);
    const std::string host = absl::StrCat("aggregator.", region, ".sextant.test");
    // In the region, its aggregator's host name is its address there.
    std::ofstream(absl::StrCat("/etc/netns/", regions_.Namespace(i), "/hosts"), std::ios::app)
        << regions_.Inside(i) << " " << host << "\n";
    auto agg = RunProcess({kSextant, "certs", "issue", certs, "agg-" + region, "--role",
                           "aggregator", "--region", region, "--san", host, "--enroll"});
    ASSERT_EQ(agg.exit_code, 0) << agg.err;
    for (const char* site : kSites) {
      auto client = RunProcess({kSextant, "certs", "issue", certs, absl::StrCat(site, "-", region),
                                "--role", "client", "--region", region, "--enroll"});
      ASSERT_EQ(client.exit_code, 0) << client.err;
    }
  }
  // Each host names the pool its instance belongs to, and the run bills it there: a small
  // aggregator pool and a client pool in every region, on a catalog of the test's regions.
  std::string catalog =
      "regions: [r1, r2, r3]\ninstances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 2}}\n"
      "billing: {increment: 1s, minimum: 1s}\noffers:\n";
  std::string pools = "resources:\n  catalog: catalog.yaml\n  pools:\n";
  for (int i = 1; i <= kRegions; ++i) {
    absl::StrAppend(&catalog, "  - {region: r", i,
                    ", instance: box, market: on_demand, price_per_second: 0.001}\n");
    absl::StrAppend(&pools, "    - {name: agg-r", i, ", region: r", i,
                    ", instance: box, hosts: aggregator}\n", "    - {name: sites-r", i,
                    ", region: r", i, ", instance: box, hosts: clients}\n");
  }
  absl::StrAppend(&catalog, "transfer: {between_regions_per_gb: 0.02}\n");
  WriteFile(dir_ + "/catalog.yaml", catalog);
  WriteFile(dir_ + "/fed.yaml", SecureFederation("regions-fl-by-hand") + pools);
  StartRelays(7002, "127.0.0.1", regions_.Path(0));
  BackgroundProcess run(
      regions_.In(0, {kSextant, "run", dir_ + "/fed.yaml", "--run-dir", dir_ + "/run", "--listen",
                      "127.0.0.1:7002", "--tls-dir", certs, "--external-participants"}));
  ASSERT_TRUE(run.WaitForOutput("started by hand", 60)) << run.out() << run.err();
  const std::string upstream = absl::StrCat(kOrchestratorName, ":7002");
  // Each site is told its run's id, as the orchestrator prints it, out of band.
  ASSERT_TRUE(run.WaitForOutput("--experiment-id ", 10)) << run.out();
  std::smatch id;
  const std::string announced = run.out();
  ASSERT_TRUE(std::regex_search(announced, id, std::regex("--experiment-id (\\S+)"))) << announced;

  // A client's certificate is not an aggregator's: no plan, and nothing joins.
  auto forged = RunProcess(
      regions_.In(1, {kWorker, "--role", "aggregator", "--join", "--connect", upstream, "--tls-dir",
                      certs, "--tls-name", "site-a-r1", "--work-dir", dir_ + "/forged"}),
      60);
  EXPECT_EQ(forged.exit_code, 1) << forged.out << forged.err;
  EXPECT_NE(forged.err.find("PERMISSION_DENIED"), std::string::npos) << forged.err;

  // An aggregator naming another region's pool is refused before it runs anything.
  auto elsewhere =
      RunProcess(regions_.In(1, {kWorker, "--role", "aggregator", "--join", "--connect", upstream,
                                 "--tls-dir", certs, "--tls-name", "agg-r1", "--pool", "agg-r2",
                                 "--work-dir", dir_ + "/elsewhere"}),
                 60);
  EXPECT_EQ(elsewhere.exit_code, 1) << elsewhere.out << elsewhere.err;
  EXPECT_NE(elsewhere.err.find("pool agg-r2 is in region r2, not r1"), std::string::npos)
      << elsewhere.err;

  std::vector<std::unique_ptr<BackgroundProcess>> participants;
  for (int i = 1; i <= kRegions; ++i) {
    const std::string region = absl::StrCat("r", i);
    participants.push_back(std::make_unique<BackgroundProcess>(
        regions_.In(i, {kWorker, "--role", "aggregator", "--join", "--connect", upstream,
                        "--tls-dir", certs, "--tls-name", "agg-" + region, "--pool",
                        "agg-" + region, "--listen", absl::StrCat(regions_.Inside(i), ":7443"),
                        "--work-dir", absl::StrCat(dir_, "/agg-", region)})));
    for (const char* site : kSites) {
      participants.push_back(std::make_unique<BackgroundProcess>(
          regions_.In(i, {kWorker, "--role", "client", "--join", "--connect",
                          absl::StrCat("aggregator.", region, ".sextant.test:7443"), "--tls-dir",
                          certs, "--tls-name", absl::StrCat(site, "-", region), "--pool",
                          "sites-" + region, "--threads", "1", "--experiment-id", id[1].str()})));
    }
  }
  const int rc = run.Wait(400);
  for (auto& p : participants) {
    EXPECT_EQ(p->Wait(rc == 0 ? 60 : 1), 0) << p->out() << p->err();
  }
  ASSERT_EQ(rc, 0) << run.out() << run.err();

  auto table = RoundsTable::Open(RunDir::DbPath(dir_ + "/run"));
  ASSERT_TRUE(table.ok()) << table.status();
  auto rows = table->Load();
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::map<int64_t, RoundRow> global;
  for (const RoundRow& r : *rows) {
    EXPECT_EQ(r.region, "") << "hide_region_sums: no region's own row";
    if (r.region.empty()) global[r.round] = r;
  }
  ASSERT_EQ(global.size(), 3u) << run.out();
  for (int64_t round = 1; round <= 3; ++round) {
    EXPECT_EQ(global[round].clients, 6) << "round " << round;
  }
  EXPECT_GT(global[3].accuracy, 0.4) << "chance is 0.1";
  // The run started no participant of its own; each aggregator placed its two clients, named
  // by their certificates, and every aggregator reached the orchestrator through its relay.
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run/federation/tls"));
  for (int i = 1; i <= kRegions; ++i) {
    const std::string& log = participants[(i - 1) * 3]->out();
    for (const char* site : kSites) {
      EXPECT_NE(log.find(absl::StrCat("client r", i, "/", site, "-r", i, " joined at place")),
                std::string::npos)
          << log;
    }
    EXPECT_GT(relays_[i - 1]->bytes_relayed(), 3 * 50000) << "region " << i;
  }
  // Every participant was billed on the pool it named, from its join to the end of the run:
  // one aggregator and two clients in each region, each a `federation_joined` event.
  auto results = RunProcess({kSextant, "results", dir_ + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  const nlohmann::json j = nlohmann::json::parse(results.out);
  for (int i = 1; i <= kRegions; ++i) {
    for (const std::string pool : {absl::StrCat("agg-r", i), absl::StrCat("sites-r", i)}) {
      EXPECT_GT(j["cost"]["by_pool"].value(pool, 0.0), 0) << pool << " " << j["cost"].dump();
    }
  }
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  size_t joined = 0;
  for (size_t at = events.out.find("federation_joined"); at != std::string::npos;
       at = events.out.find("federation_joined", at + 1)) {
    ++joined;
  }
  EXPECT_EQ(joined, static_cast<size_t>(3 * kRegions)) << events.out;
}

}  // namespace
}  // namespace sextant
