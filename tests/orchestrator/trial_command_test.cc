#include "orchestrator/trial_command.h"

#include "gtest/gtest.h"
#include "orchestrator/experiment_loader.h"
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
  EXPECT_EQ(*SubstituteParams("--lr=${lr} -n ${layers}/${act}", p, space),
            "--lr=0.001 -n 3/relu");
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

}  // namespace
}  // namespace sextant
