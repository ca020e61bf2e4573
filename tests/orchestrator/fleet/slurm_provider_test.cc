// The Slurm provider against real daemons: slurmctld, slurmd and munged from Debian's packages,
// started on loopback by the test with their own config (tests/orchestrator/fleet/slurm_cluster.h).
// Skipped, with the reason, where they cannot start (not root, packages missing).
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/fleet/slurm_cluster.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using testing::CheckpointingStepsScript;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::SlurmCluster;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

TEST(SlurmProviderTest, SixTrialSearchRunsEveryWorkerAsASlurmJobInItsPoolsPartition) {
  const std::string dir = MakeTempDir("slurm");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster");
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);

  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(5));
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: spot, price_per_hour: 36,
     interruption: {rate_per_day: 0.001, notice: 1s, notice_probability: 1}}
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 100}
)");
  // Three at a time on two pools of two: spot fills first, on-demand takes the rest.
  WriteFile(dir + "/exp.yaml", R"(name: slurm-six
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: sobol, seed: 3, max_trials: 6, max_concurrent: 3}
trial:
  command: [sh, steps.sh]
resources:
  provider: slurm
  catalog: catalog.yaml
  idle_timeout: 2s
  pools:
    - {name: spot-r1, region: r1, instance: gpu.1x, market: spot, max_instances: 2}
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)");
  const std::string env = absl::StrCat("SLURM_CONF=", cluster.conf());
  auto run = RunProcess(
      {"env", env, kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
       "--slurm-partition", "ondemand", "--slurm-spot-partition", "spot", "--heartbeat", "0.5s"},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  auto results = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), 6u) << j.dump();
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["metrics"]["step"], 5.0) << t.dump();
  }
  EXPECT_GT(j["cost"]["total"].get<double>(), 0);

  // Every instance was a job that sbatch queued: its id is in the events and Slurm's own
  // completion log names the same job, in the partition of its pool's market.
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  std::map<std::string, std::string> pool_of_job;
  std::regex launched(R"(instance ([a-z0-9-]+)-\d+ in pool [a-z0-9-]+ \(slurm job=(\d+)\))");
  for (auto it = std::sregex_iterator(events.out.begin(), events.out.end(), launched);
       it != std::sregex_iterator(); ++it) {
    pool_of_job[(*it)[2]] = (*it)[1];
  }
  std::set<std::string> pools;
  for (const auto& [job, pool] : pool_of_job) pools.insert(pool);
  EXPECT_EQ(pools, (std::set<std::string>{"spot-r1", "od-r1"})) << events.out;
  // Every instance was stopped at the end of the run: nothing is left in the queue.
  std::string queue;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        queue = RunProcess({"env", env, "squeue", "-h", "-t", "PENDING,RUNNING"}).out;
        return queue.empty();
      },
      15))
      << queue;
  const std::string jobcomp = ReadFile(cluster.jobcomp_path());
  for (const auto& [job, pool] : pool_of_job) {
    const std::string partition = pool == "spot-r1" ? "spot" : "ondemand";
    std::regex line(
        absl::StrCat("JobId=", job, " .*Name=sextant-", pool, "-\\d+ .*Partition=", partition));
    EXPECT_TRUE(std::regex_search(jobcomp, line)) << "job " << job << " of pool " << pool << "\n"
                                                  << jobcomp;
  }
}

// Two regions of two clients on Slurm: region a's clients on spot (taken back at
// `spot_rate_per_day`, after a 1 s notice), its aggregator and region b on-demand.
void WriteFederatedExperiment(const std::string& dir, double spot_rate_per_day, int rounds,
                              int min_clients, const std::string& deadline) {
  WriteFile(dir + "/catalog.yaml",
            absl::StrCat(R"(regions: [a, b]
instances: {box: {gpus: 0, gpu_memory_gb: 0, cpus: 1}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: a, instance: box, market: on_demand, price_per_hour: 36}
  - {region: a, instance: box, market: spot, price_per_hour: 12,
     interruption: {rate_per_day: )",
                         spot_rate_per_day, R"(, notice: 1s, notice_probability: 1}}
  - {region: b, instance: box, market: on_demand, price_per_hour: 36}
transfer: {between_regions_per_gb: 0.02}
)"));
  WriteFile(dir + "/exp.yaml", absl::StrCat(R"(name: slurm-fl
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: a, clients: 2}, {name: b, clients: 2}]
  rounds: )",
                                            rounds, R"(
  local_lr: 0.05
  min_clients: )",
                                            min_clients, R"(
  round_deadline: )",
                                            deadline, R"(
  seed: 5
  examples_per_client: 300
  validation_examples: 500
  secure_aggregation: false
resources:
  provider: slurm
  catalog: catalog.yaml
  pools:
    - {name: a-clients, region: a, instance: box, market: spot, hosts: clients}
    - {name: a-agg, region: a, instance: box, hosts: aggregator}
    - {name: b-all, region: b, instance: box}
)"));
}

// The Slurm job of each participant that `sextant events` names as launched: its job name
// (sextant-client-a-0, sextant-client-a-0.2 for its first replacement) -> its job id.
std::map<std::string, std::string> ParticipantJobs(const std::string& events) {
  std::map<std::string, std::string> job_of;
  std::regex launched(R"((aggregator|client) ([ab])(?:/(\d))? slurm job=(\d+) pool=([a-z-]+))");
  std::map<std::string, int> launches;
  for (auto it = std::sregex_iterator(events.begin(), events.end(), launched);
       it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1] == "aggregator"
                           ? absl::StrCat("aggregator-", (*it)[2].str())
                           : absl::StrCat("client-", (*it)[2].str(), "-", (*it)[3].str());
    const int n = ++launches[name];
    if (n > 1) absl::StrAppend(&name, ".", n);
    job_of[name] = (*it)[4];
  }
  return job_of;
}

// Waits until the queue is empty, then finds each job of `job_of` in Slurm's completion log,
// under its name, in its pool's partition: spot for region a's clients, else ondemand.
void ExpectEveryJobEndedInItsPartition(const SlurmCluster& cluster,
                                       const std::map<std::string, std::string>& job_of) {
  const std::string env = absl::StrCat("SLURM_CONF=", cluster.conf());
  std::string queue;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        queue = RunProcess({"env", env, "squeue", "-h", "-t", "PENDING,RUNNING"}).out;
        return queue.empty();
      },
      15))
      << queue;
  const std::string jobcomp = ReadFile(cluster.jobcomp_path());
  for (const auto& [name, job] : job_of) {
    const std::string partition = absl::StartsWith(name, "client-a") ? "spot" : "ondemand";
    std::regex line(
        absl::StrCat("JobId=", job, " .*Name=sextant-", name, " .*Partition=", partition));
    EXPECT_TRUE(std::regex_search(jobcomp, line)) << name << " (job " << job << ")\n" << jobcomp;
  }
}

// Runs DIR/exp.yaml on the cluster (on-demand jobs in partition ondemand, spot ones in spot)
// into DIR/run and returns its results; nothing, with the failure added, when the run or
// `results` failed.
std::optional<nlohmann::json> RunOnSlurm(const SlurmCluster& cluster, const std::string& dir,
                                         const std::vector<std::string>& flags = {}) {
  const std::string env = absl::StrCat("SLURM_CONF=", cluster.conf());
  std::vector<std::string> argv = {"env",
                                   env,
                                   kSextant,
                                   "run",
                                   dir + "/exp.yaml",
                                   "--run-dir",
                                   dir + "/run",
                                   "--slurm-partition",
                                   "ondemand",
                                   "--slurm-spot-partition",
                                   "spot"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto run = RunProcess(argv, 240);
  if (run.exit_code != 0) {
    ADD_FAILURE() << "sextant run exited " << run.exit_code << "\n" << run.out << run.err;
    return std::nullopt;
  }
  auto results = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  if (results.exit_code != 0) {
    ADD_FAILURE() << "sextant results: " << results.err;
    return std::nullopt;
  }
  return nlohmann::json::parse(results.out);
}

// A federated run on Slurm: each region's aggregator and clients are jobs in the partition of
// their pool's market (region a's clients on spot, everything else on-demand), billed on their
// pools, and none is left in the queue once the run ends.
TEST(SlurmProviderTest, FederatedRunPlacesEveryParticipantAsAJobInItsPoolsPartition) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("slurm-fl");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster");
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);
  WriteFederatedExperiment(dir, 0.001, 3, 4, "60s");
  const std::optional<nlohmann::json> results = RunOnSlurm(cluster, dir);
  ASSERT_TRUE(results.has_value());
  const nlohmann::json& j = *results;
  EXPECT_EQ(j["state"], "COMPLETED");
  for (const char* pool : {"a-clients", "a-agg", "b-all"}) {
    EXPECT_GT(j["cost"]["by_pool"][pool].get<double>(), 0) << pool << "\n" << j["cost"].dump();
  }

  // Six participants, each a job sbatch queued, named after it, in its pool's partition.
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  const std::map<std::string, std::string> job_of = ParticipantJobs(events.out);
  ASSERT_EQ(job_of.size(), 6u) << events.out;
  ExpectEveryJobEndedInItsPartition(cluster, job_of);
}

// Each region on its own provider: region a's participants are Slurm jobs in their pools'
// partitions, region b's (its pool says `provider: local`) processes on this machine; every
// pool is billed and the run completes.
TEST(SlurmProviderTest, FederatedRegionsRunOnTheirOwnProviders) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("slurm-fl-mixed");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster");
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);
  WriteFederatedExperiment(dir, 0.001, 2, 4, "60s");
  std::string exp = ReadFile(dir + "/exp.yaml");
  const std::string b = "{name: b-all, region: b, instance: box}";
  ASSERT_NE(exp.find(b), std::string::npos) << exp;
  exp.replace(exp.find(b), b.size(), "{name: b-all, region: b, instance: box, provider: local}");
  WriteFile(dir + "/exp.yaml", exp);
  const std::optional<nlohmann::json> results = RunOnSlurm(cluster, dir);
  ASSERT_TRUE(results.has_value());
  const nlohmann::json& j = *results;
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["federation"]["rounds_completed"], 2) << j["federation"].dump();
  for (const char* pool : {"a-clients", "a-agg", "b-all"}) {
    EXPECT_GT(j["cost"]["by_pool"][pool].get<double>(), 0) << pool << "\n" << j["cost"].dump();
  }
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  const std::map<std::string, std::string> job_of = ParticipantJobs(events.out);
  EXPECT_EQ(job_of.size(), 3u) << events.out;
  for (const auto& [name, job] : job_of) {
    EXPECT_TRUE(absl::StrContains(name, "-a")) << name << " is a job\n" << events.out;
  }
  std::regex local(R"((aggregator b|client b/\d) pid=\d+ pool=b-all)");
  EXPECT_EQ(std::distance(std::sregex_iterator(events.out.begin(), events.out.end(), local),
                          std::sregex_iterator()),
            3)
      << events.out;
  ExpectEveryJobEndedInItsPartition(cluster, job_of);
}

// Participants on other hosts than the orchestrator's, and than each other's: three Slurm nodes,
// each a network namespace of its own on one bridge, with two CPUs each, so that no region's
// three jobs fit on one node. The orchestrator stays on the host and listens on its bridge
// address, with TLS (as any non-loopback address needs). Each aggregator serves its clients on
// its own node's address, which it writes for them, and the clients on other nodes dial it
// there: every round completes.
TEST(SlurmProviderTest, FederatedParticipantsOnOtherNodesReachTheirAggregatorsAddress) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("slurm-fl-nodes");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster", 3);
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster of three nodes here: " << why);
  WriteFederatedExperiment(dir, 0.001, 3, 4, "60s");
  const std::string certs = dir + "/certs";
  auto init = RunProcess({kSextant, "certs", "init", certs, "--san", cluster.host_address()});
  ASSERT_EQ(init.exit_code, 0) << init.err;
  const std::optional<nlohmann::json> results = RunOnSlurm(
      cluster, dir, {"--listen", absl::StrCat(cluster.host_address(), ":0"), "--tls-dir", certs});
  ASSERT_TRUE(results.has_value());
  const nlohmann::json& j = *results;
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["federation"]["rounds_completed"], 3) << j["federation"].dump();

  // Each job's node, from Slurm's completion log.
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  const std::map<std::string, std::string> job_of = ParticipantJobs(events.out);
  ASSERT_EQ(job_of.size(), 6u) << events.out;
  ExpectEveryJobEndedInItsPartition(cluster, job_of);
  const std::string jobcomp = ReadFile(cluster.jobcomp_path());
  std::map<std::string, std::string> node_of;
  for (const auto& [name, job] : job_of) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(jobcomp, m,
                                  std::regex(absl::StrCat("JobId=", job, " .*NodeList=(node\\d)"))))
        << name << " (job " << job << ")\n"
        << jobcomp;
    node_of[name] = m[1];
  }
  for (const char* region : {"a", "b"}) {
    // Served on its node's address, not on loopback.
    const std::string address = std::string(absl::StripAsciiWhitespace(
        ReadFile(absl::StrCat(dir, "/run/federation/regions/", region, ".address"))));
    const std::string node = node_of[absl::StrCat("aggregator-", region)];
    const int index = node.back() - '0';
    EXPECT_EQ(address.substr(0, address.rfind(':')), cluster.node_address(index))
        << region << " aggregator on " << node;
    int elsewhere = 0;
    for (int i = 0; i < 2; ++i) {
      elsewhere += node_of[absl::StrCat("client-", region, "-", i)] != node;
    }
    EXPECT_GE(elsewhere, 1) << "region " << region << ": no client on another node than its "
                            << "aggregator's (" << node << ")";
  }
}

// An aggregator that Slurm itself requeues (`scontrol requeue`, as a spot partition's
// preemption does) starts again from its batch script on a new port, which it writes to its
// region's address file: its clients, finding it unreachable, read the file again and follow
// it, and the run completes every round.
TEST(SlurmProviderTest, FederatedAggregatorRequeuedBySlurmIsFoundAgainByItsClients) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("slurm-fl-requeue");
  SlurmCluster cluster;
  // A requeued job starts again once its credential has expired: 10 s here (Slurm's default
  // is 120 s).
  const std::string why = cluster.Start(dir + "/cluster", 1, 10);
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);
  // Rounds close on region b's two clients when region a sits one out.
  WriteFederatedExperiment(dir, 0.001, 8, 2, "10s");
  std::string exp = ReadFile(dir + "/exp.yaml");
  const std::string agg = "{name: a-agg, region: a, instance: box, hosts: aggregator}";
  ASSERT_NE(exp.find(agg), std::string::npos) << exp;
  exp.replace(exp.find(agg), agg.size(),
              "{name: a-agg, region: a, instance: box, market: spot, hosts: aggregator}");
  // Region a's clients take 300 times their training (rounds of about half a second), so that
  // the run is still going when the requeue below lands: plaintext rounds of this size are
  // over in some 60 ms, and all 8 could end before Slurm acted.
  const std::string plain = "  secure_aggregation: false\n";
  ASSERT_NE(exp.find(plain), std::string::npos) << exp;
  exp.replace(exp.find(plain), plain.size(),
              "  stragglers: {clients: [a/0, a/1], slowdown: 300}\n" + plain);
  WriteFile(dir + "/exp.yaml", exp);
  const std::string env = absl::StrCat("SLURM_CONF=", cluster.conf());
  BackgroundProcess run({"env", env, kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
                         "--slurm-partition", "ondemand", "--slurm-spot-partition", "spot"});
  ASSERT_TRUE(run.WaitForOutput("round=2 ", 120)) << run.out() << run.err();
  const std::string address_file = dir + "/run/federation/regions/a.address";
  const std::string first = std::string(absl::StripAsciiWhitespace(ReadFile(address_file)));
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  const std::map<std::string, std::string> job_of = ParticipantJobs(events.out);
  ASSERT_TRUE(job_of.count("aggregator-a")) << events.out;
  auto requeue = RunProcess({"env", env, "scontrol", "requeue", job_of.at("aggregator-a")});
  ASSERT_EQ(requeue.exit_code, 0) << requeue.out << requeue.err;
  ASSERT_EQ(run.Wait(240), 0) << run.out() << run.err();

  const std::string second = std::string(absl::StripAsciiWhitespace(ReadFile(address_file)));
  EXPECT_NE(second, first) << "the requeued aggregator serves where it did before";
  auto results = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  const nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["federation"]["rounds_completed"], 8) << j["federation"].dump();
  // Region a's clients followed it: each says where it moved, and both sent updates after it.
  for (int i = 0; i < 2; ++i) {
    const std::string log = ReadFile(absl::StrCat(dir, "/run/logs/client-a-", i, ".log"));
    EXPECT_NE(log.find("aggregator moved: " + first + " -> " + second), std::string::npos)
        << "client a/" << i << ":\n"
        << log;
  }
}

// Spot clients on Slurm taken back at their pool's interruption model (scancel --signal=TERM
// after the notice): each is a dropout for its round and a new job takes its place in the spot
// partition, and the run completes every round.
TEST(SlurmProviderTest, FederatedSpotClientsTakenBackAreReplacedByNewJobs) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = MakeTempDir("slurm-fl-spot");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster");
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);
  // A spot client lives 2 s on average; rounds close on region b's two clients at the latest.
  WriteFederatedExperiment(dir, 43200, 6, 2, "5s");
  const std::optional<nlohmann::json> results = RunOnSlurm(cluster, dir);
  ASSERT_TRUE(results.has_value());
  const nlohmann::json& j = *results;
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["federation"]["rounds_completed"], 6) << j["federation"].dump();
  const int preempted = j["preemptions"]["by_pool"]["a-clients"].get<int>();
  std::printf("%d spot clients taken back\n", preempted);
  EXPECT_GE(preempted, 1) << j["preemptions"].dump();
  EXPECT_EQ(j["preemptions"]["total"], preempted) << "only spot clients are taken back";

  auto events = RunProcess({kSextant, "events", dir + "/run"});
  const std::map<std::string, std::string> job_of = ParticipantJobs(events.out);
  // Each one taken back is replaced by a new job, but for one that is still leaving when the
  // last round closes (at most one per spot client: region a's two).
  const int replacements = static_cast<int>(job_of.size()) - 6;
  EXPECT_LE(replacements, preempted) << events.out;
  EXPECT_GE(replacements, preempted - 2) << events.out;
  ExpectEveryJobEndedInItsPartition(cluster, job_of);
}

}  // namespace
}  // namespace sextant
