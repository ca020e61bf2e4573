#include "orchestrator/core/trial_command.h"

#include "gtest/gtest.h"
#include "orchestrator/core/experiment_loader.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

ParamSpec Spec(const std::string& name, ParamSpec::Kind kind = ParamSpec::Kind::kFloat) {
  ParamSpec p;
  p.name = name;
  p.kind = kind;
  return p;
}

TEST(TrialCommandTest, SubstitutesEveryKindOfParameter) {
  SearchSpace space;
  space.params = {Spec("lr"), Spec("layers"), Spec("act")};
  Params p = {{"lr", 0.001}, {"layers", int64_t{3}}, {"act", std::string("relu")}};
  EXPECT_EQ(*SubstituteParams("--lr=${lr} -n ${layers}/${act}", p, space), "--lr=0.001 -n 3/relu");
  EXPECT_EQ(*SubstituteParams("plain", p, space), "plain");
  EXPECT_FALSE(SubstituteParams("${nope}", p, space).ok());
  EXPECT_FALSE(SubstituteParams("${lr", p, space).ok());
}

TEST(TrialCommandTest, ParamsJsonRoundTripsWithTypes) {
  SearchSpace space;
  space.params = {Spec("lr"), Spec("n", ParamSpec::Kind::kInt),
                  Spec("act", ParamSpec::Kind::kCategorical)};
  Params p = {{"lr", 3.0}, {"n", int64_t{4}}, {"act", std::string("tanh")}};
  std::string json = ParamsToJson(p);
  EXPECT_EQ(json, R"({"act":"tanh","lr":3.0,"n":4})");
  EXPECT_EQ(*ParamsFromJson(json, space), p);
  EXPECT_FALSE(ParamsFromJson("[1]", space).ok());
}

TEST(TrialCommandTest, AssignmentCarriesTheSextantEnvironment) {
  v1::ExperimentSpec spec = testing::SpecFromYaml(R"(
name: env
objective: {metric: loss}
parameters:
  lr: {type: float, min: 0.0001, max: 1, log: true}
trial:
  command: [train, "--lr=${lr}"]
  env: {LR_COPY: "${lr}"}
  timeout: 30s
)");
  Params p = {{"lr", 0.01}};
  auto a = BuildAssignment(spec, ToSearchSpace(spec), p, {7, 2, "/ck/trial-7"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->argv(1), "--lr=0.01");
  EXPECT_EQ(a->env().at("LR_COPY"), "0.01");
  EXPECT_EQ(a->env().at("SEXTANT_PARAM_LR"), "0.01");
  EXPECT_EQ(a->env().at("SEXTANT_PARAMS"), R"({"lr":0.01})");
  EXPECT_EQ(a->env().at("SEXTANT_TRIAL_ID"), "7");
  EXPECT_EQ(a->env().at("SEXTANT_ATTEMPT"), "2");
  EXPECT_EQ(a->env().at("SEXTANT_CHECKPOINT_DIR"), "/ck/trial-7");
  EXPECT_EQ(a->timeout_seconds(), 30);
}

// Federated tuning: each trial is an inner `sextant run`, which serves and dials over the outer
// run's TLS folder when it has one, and places its participants in the run's Slurm partitions.
TEST(TrialCommandTest, AFederatedTrialIsAnInnerRunWithTheRunsTlsFolder) {
  v1::ExperimentSpec spec = testing::SpecFromYaml(R"(
name: fl
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.01, max: 0.1}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: [{name: east, clients: 2}]
)");
  Params p = {{"local_lr", 0.05}};
  auto plain = BuildAssignment(spec, ToSearchSpace(spec), p, {3, 1, "/ck/trial-3"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->argv_size(), 5);
  EXPECT_EQ(plain->argv(4), "/ck/trial-3/federation");
  EXPECT_EQ(plain->env().at("SEXTANT_FEDERATED_TRIAL"), "1");
  auto tls = BuildAssignment(
      spec, ToSearchSpace(spec), p,
      {3, 1, "/ck/trial-3", {"--tls-dir", "/etc/certs", "--slurm-spot-partition", "spot"}});
  ASSERT_TRUE(tls.ok()) << tls.status();
  ASSERT_EQ(tls->argv_size(), 9);
  EXPECT_EQ(tls->argv(5), "--tls-dir");
  EXPECT_EQ(tls->argv(6), "/etc/certs");
  EXPECT_EQ(tls->argv(7), "--slurm-spot-partition");  // where its participants' jobs go
  EXPECT_EQ(tls->argv(8), "spot");
}

TEST(TrialCommandTest, BuiltinTrainerGetsItsHyperparametersAsFlags) {
  v1::ExperimentSpec spec = testing::SpecFromYaml(R"(
name: builtin
objective: {metric: val_accuracy, goal: maximize}
parameters:
  lr: {type: float, min: 0.0001, max: 0.1, log: true}
  batch_size: {type: int, min: 32, max: 256}
  width: {type: int, min: 64, max: 512}
  optimizer: {type: categorical, values: [adam, sgd]}
search: {sampler: random, scheduler: asha, fidelity: {name: epoch, min: 1, max: 9}}
trial:
  builtin:
    model: mlp
    epochs: 9
    args: {hidden: "${width},${width}", optimizer: sgd}
)");
  Params p = {{"lr", 0.01},
              {"batch_size", int64_t{64}},
              {"width", int64_t{128}},
              {"optimizer", std::string("adam")}};
  auto a = BuildAssignment(spec, ToSearchSpace(spec), p, {3, 1, "/ck/trial-3"});
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<std::string> argv(a->argv().begin(), a->argv().end());
  // The search's optimizer is overridden by args; width is not a trainer option by itself.
  EXPECT_EQ(argv, (std::vector<std::string>{
                      "sextant-worker", "train", "--model", "mlp", "--dataset", "fashion-mnist",
                      "--epochs", "9", "--fidelity-name", "epoch", "--batch-size", "64", "--lr",
                      "0.01", "--hidden", "128,128", "--optimizer", "sgd"}));
  EXPECT_EQ(a->env().at("SEXTANT_CHECKPOINT_DIR"), "/ck/trial-3");
}

}  // namespace
}  // namespace sextant
