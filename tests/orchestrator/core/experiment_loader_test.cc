#include "orchestrator/core/experiment_loader.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

// Drops the newline that follows R"( so that the first YAML line is line 1.
LoadResult Load(std::string_view yaml) {
  if (!yaml.empty() && yaml.front() == '\n') yaml.remove_prefix(1);
  return LoadExperimentFromString(std::string(yaml), "exp.yaml");
}

std::vector<std::string> Errors(std::string_view yaml) {
  std::vector<std::string> out;
  for (const LoadError& e : Load(yaml).errors) out.push_back(e.ToString());
  return out;
}

constexpr std::string_view kFullExample = R"(
name: branin-bo
objective: {metric: loss, goal: maximize, target: 0.5}
parameters:
  x0: {type: float, min: -5, max: 10}
  lr: {type: float, min: 1.0e-5, max: 1.0e-1, log: true, grid_points: 4}
  layers: {type: int, min: 1, max: 4}
  act: {type: categorical, values: [relu, tanh, 3]}
  slope: {type: float, min: 0, max: 1, when: {act: relu, layers: 2}}
search:
  sampler: bayesian
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 27}
  seed: 18446744073709551615
  max_trials: 100
  max_concurrent: 4
  initial_design: 8
trial:
  command: [python3, objective.py, "--x0=${x0}", "--lr=${lr}", 7]
  timeout: 10m
  env: {MODE: fast, ACT: "${act}"}
  working_dir: src
  max_restarts: 2
budget: {max_cost: 50.0, max_wall_time: 2h}
resources:
  provider: simulated
  pools:
    - {name: east-spot, region: cn-east-1, instance: gpu.1x, market: spot, max_instances: 8}
    - {name: west, region: cn-west-1, instance: gpu.4x, min_instances: 1, max_instances: 2}
)";

TEST(ExperimentLoaderTest, FullExampleRoundTripsIntoSpec) {
  LoadResult r = LoadExperimentFromString(std::string(kFullExample.substr(1)), "dir/exp.yaml");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::ExperimentSpec& s = r.spec;
  EXPECT_EQ(s.name(), "branin-bo");
  EXPECT_EQ(s.source_path(), "dir/exp.yaml");
  EXPECT_EQ(s.objective().metric(), "loss");
  EXPECT_EQ(s.objective().goal(), v1::Objective::MAXIMIZE);
  ASSERT_TRUE(s.objective().has_target());
  EXPECT_DOUBLE_EQ(s.objective().target(), 0.5);

  ASSERT_EQ(s.parameters_size(), 5);
  EXPECT_EQ(s.parameters(0).name(), "x0");
  EXPECT_EQ(s.parameters(0).type(), v1::Parameter::FLOAT);
  EXPECT_DOUBLE_EQ(s.parameters(0).min(), -5);
  EXPECT_DOUBLE_EQ(s.parameters(0).max(), 10);
  EXPECT_EQ(s.parameters(1).name(), "lr");
  EXPECT_TRUE(s.parameters(1).log());
  EXPECT_DOUBLE_EQ(s.parameters(1).min(), 1e-5);
  EXPECT_EQ(s.parameters(1).grid_points(), 4);
  EXPECT_EQ(s.parameters(2).type(), v1::Parameter::INT);
  EXPECT_EQ(s.parameters(3).type(), v1::Parameter::CATEGORICAL);
  EXPECT_THAT(s.parameters(3).values(), ElementsAre("relu", "tanh", "3"));
  EXPECT_EQ(s.parameters(4).when().at("act"), "relu");
  EXPECT_EQ(s.parameters(4).when().at("layers"), "2");

  EXPECT_EQ(s.search().sampler(), v1::Search::BAYESIAN);
  EXPECT_EQ(s.search().scheduler(), v1::Search::ASHA);
  EXPECT_EQ(s.search().fidelity().name(), "epoch");
  EXPECT_DOUBLE_EQ(s.search().fidelity().min(), 1);
  EXPECT_DOUBLE_EQ(s.search().fidelity().max(), 27);
  EXPECT_DOUBLE_EQ(s.search().fidelity().reduction_factor(), 3);
  EXPECT_EQ(s.search().seed(), 18446744073709551615ull);
  EXPECT_EQ(s.search().max_trials(), 100);
  EXPECT_EQ(s.search().max_concurrent(), 4);
  EXPECT_EQ(s.search().initial_design(), 8);

  EXPECT_THAT(s.trial().command(),
              ElementsAre("python3", "objective.py", "--x0=${x0}", "--lr=${lr}", "7"));
  EXPECT_DOUBLE_EQ(s.trial().timeout_seconds(), 600);
  EXPECT_EQ(s.trial().env().at("MODE"), "fast");
  EXPECT_EQ(s.trial().env().at("ACT"), "${act}");
  EXPECT_EQ(s.trial().working_dir(), "dir/src");
  EXPECT_EQ(s.trial().max_restarts(), 2);

  ASSERT_TRUE(s.budget().has_max_cost());
  EXPECT_DOUBLE_EQ(s.budget().max_cost(), 50);
  EXPECT_DOUBLE_EQ(s.budget().max_wall_time_seconds(), 7200);
  EXPECT_EQ(s.budget().currency(), "USD");

  EXPECT_EQ(s.resources().provider(), "simulated");
  ASSERT_EQ(s.resources().pools_size(), 2);
  EXPECT_EQ(s.resources().pools(0).name(), "east-spot");
  EXPECT_EQ(s.resources().pools(0).region(), "cn-east-1");
  EXPECT_EQ(s.resources().pools(0).instance(), "gpu.1x");
  EXPECT_EQ(s.resources().pools(0).market(), v1::Pool::SPOT);
  EXPECT_EQ(s.resources().pools(0).min_instances(), 0);
  EXPECT_EQ(s.resources().pools(0).max_instances(), 8);
  EXPECT_EQ(s.resources().pools(1).market(), v1::Pool::ON_DEMAND);
  EXPECT_EQ(s.resources().pools(1).min_instances(), 1);
  EXPECT_FALSE(s.has_federation());
}

TEST(ExperimentLoaderTest, MinimalFileGetsDefaults) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1}
trial:
  command: [run, "${x}"]
)");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::ExperimentSpec& s = r.spec;
  EXPECT_EQ(s.objective().goal(), v1::Objective::MINIMIZE);
  EXPECT_FALSE(s.objective().has_target());
  EXPECT_FALSE(s.parameters(0).log());
  EXPECT_EQ(s.parameters(0).grid_points(), 0);
  EXPECT_EQ(s.search().sampler(), v1::Search::RANDOM);
  EXPECT_EQ(s.search().scheduler(), v1::Search::NONE);
  EXPECT_FALSE(s.search().has_fidelity());
  EXPECT_EQ(s.search().seed(), 0u);
  EXPECT_EQ(s.search().max_trials(), 20);
  EXPECT_EQ(s.search().max_concurrent(), 1);
  EXPECT_EQ(s.search().initial_design(), 0);
  EXPECT_DOUBLE_EQ(s.trial().timeout_seconds(), 0);
  EXPECT_EQ(s.trial().working_dir(), ".");
  EXPECT_EQ(s.trial().max_restarts(), 0);
  EXPECT_FALSE(s.budget().has_max_cost());
  EXPECT_EQ(s.budget().currency(), "USD");
  EXPECT_EQ(s.resources().provider(), "local");
  EXPECT_EQ(s.resources().pools_size(), 0);
  EXPECT_FALSE(s.has_federation());
}

TEST(ExperimentLoaderTest, FederationKeysAndDefaults) {
  LoadResult r = Load(R"(
name: fl
objective: {metric: accuracy, goal: maximize}
trial:
  builtin: {model: cnn, dataset: fashion-mnist, epochs: 2, gpus: 1, args: {dropout: "0.25"}}
federation:
  regions:
    - {name: east, clients: 4}
    - {name: west, clients: 2}
  rounds: 5
  clients_per_round: 0.5
  server_optimizer: fedadam
  min_clients: 3
  round_deadline: 90s
  partition: dirichlet
  dirichlet_alpha: 0.1
  secure_aggregation: false
)");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::Federation& f = r.spec.federation();
  ASSERT_EQ(f.regions_size(), 2);
  EXPECT_EQ(f.regions(1).name(), "west");
  EXPECT_EQ(f.regions(1).clients(), 2);
  EXPECT_EQ(f.rounds(), 5);
  EXPECT_DOUBLE_EQ(f.clients_per_round(), 0.5);
  EXPECT_EQ(f.local_epochs(), 1);
  EXPECT_EQ(f.local_batch_size(), 32);
  EXPECT_EQ(f.aggregation(), "fedavg");
  EXPECT_EQ(f.server_optimizer(), "fedadam");
  EXPECT_EQ(f.min_clients(), 3);
  EXPECT_DOUBLE_EQ(f.round_deadline_seconds(), 90);
  EXPECT_EQ(f.partition(), "dirichlet");
  EXPECT_DOUBLE_EQ(f.dirichlet_alpha(), 0.1);
  EXPECT_FALSE(f.secure_aggregation());
  EXPECT_EQ(r.spec.trial().builtin().model(), "cnn");
  EXPECT_EQ(r.spec.trial().builtin().epochs(), 2);
  EXPECT_EQ(r.spec.trial().builtin().args().at("dropout"), "0.25");
  EXPECT_EQ(r.spec.parameters_size(), 0);
}

// A federation left without regions (here: written twice, the second block empty of them)
// whose run still has pools is an error that names the regions, not a crash placing nobody.
TEST(ExperimentLoaderTest, AFederationWithoutRegionsBesidePoolsIsAnErrorNotACrash) {
  const std::vector<std::string> errors = Errors(R"(
name: fl
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: []
  rounds: 2
resources:
  pools:
    - {name: us-gpu, region: us-east-1, instance: gpu.1x, hosts: clients, max_instances: 2}
)");
  EXPECT_THAT(errors, Contains(HasSubstr("regions")));
}

TEST(ExperimentLoaderTest, ToSearchSpaceCopiesEveryDimension) {
  LoadResult r = LoadExperimentFromString(std::string(kFullExample.substr(1)), "exp.yaml");
  ASSERT_TRUE(r.ok());
  SearchSpace space = ToSearchSpace(r.spec);
  ASSERT_EQ(space.params.size(), 5u);
  EXPECT_EQ(space.params[0].name, "x0");
  EXPECT_EQ(space.params[0].kind, ParamSpec::Kind::kFloat);
  EXPECT_DOUBLE_EQ(space.params[0].min, -5);
  EXPECT_DOUBLE_EQ(space.params[0].max, 10);
  EXPECT_TRUE(space.params[1].log);
  EXPECT_EQ(space.params[1].grid_points, 4);
  EXPECT_EQ(space.params[2].kind, ParamSpec::Kind::kInt);
  EXPECT_EQ(space.params[3].kind, ParamSpec::Kind::kCategorical);
  EXPECT_THAT(space.params[3].values, ElementsAre("relu", "tanh", "3"));
  EXPECT_EQ(space.params[4].when,
            (std::map<std::string, std::string>{{"act", "relu"}, {"layers", "2"}}));
}

// --- One test per error class. Each checks FILE:LINE:COL and the key path. ---

TEST(ExperimentLoaderTest, MissingNameIsReportedAtTheTop) {
  EXPECT_THAT(Errors(R"(
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:1:1: name: required key is missing"));
}

TEST(ExperimentLoaderTest, BadNameIsAnError) {
  EXPECT_THAT(Errors(R"(
name: Branin BO
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:1:7: name: invalid name 'Branin BO'")));
}

TEST(ExperimentLoaderTest, NameLongerThan64IsAnError) {
  std::string yaml = "name: " + std::string(65, 'a') + R"(
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)";
  EXPECT_THAT(Errors(yaml), ElementsAre(StartsWith("exp.yaml:1:7: name: too long (65")));
}

TEST(ExperimentLoaderTest, UnknownKeyListsAllowedKeys) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  lr: {type: float, min: 0, maxx: 1}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:3: parameters.lr.max: required key is missing",
                          "exp.yaml:4:29: parameters.lr.maxx: unknown key; allowed keys: type, "
                          "min, max, step, log, values, grid_points, when (did you mean 'max'?)"));
}

TEST(ExperimentLoaderTest, UnknownTopLevelKeyIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
serach: {sampler: grid}
)"),
              ElementsAre(AllOf(StartsWith("exp.yaml:5:1: serach: unknown key; allowed keys: "),
                                HasSubstr("(did you mean 'search'?)"))));
}

TEST(ExperimentLoaderTest, DuplicateKeyIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
name: u
)"),
              ElementsAre("exp.yaml:5:1: name: duplicate key"));
}

TEST(ExperimentLoaderTest, MissingObjectiveMetricIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {goal: maximize}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:2:1: objective.metric: required key is missing"));
}

TEST(ExperimentLoaderTest, UnknownGoalIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss, goal: lowest}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:2:33: objective.goal: unknown goal 'lowest'; expected one "
                          "of minimize, maximize"));
}

TEST(ExperimentLoaderTest, MinNotBelowMaxIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  x: {type: float, min: 2, max: 1}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:25: parameters.x.min: must be less than max (min 2, max 1)"));
}

TEST(ExperimentLoaderTest, IntBoundsMustBeIntegral) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  layers: {type: int, min: 1, max: 4.5}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:36: parameters.layers.max: must be an integer, got 4.5"));
}

TEST(ExperimentLoaderTest, LogNeedsPositiveMin) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  lr:
    type: float
    min: 0
    max: 0.1
    log: true
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:6:10: parameters.lr.min: must be > 0 with log: true"));
}

TEST(ExperimentLoaderTest, EmptyCategoricalIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  act: {type: categorical, values: []}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:36: parameters.act.values: must not be empty"));
}

TEST(ExperimentLoaderTest, SingleValueCategoricalIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  act: {type: categorical, values: [relu]}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:36: parameters.act.values: needs at least 2 values"));
}

TEST(ExperimentLoaderTest, DuplicateCategoricalValueIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  act: {type: categorical, values: [relu, tanh, relu]}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:49: parameters.act.values[2]: duplicate value 'relu'"));
}

TEST(ExperimentLoaderTest, GridPointsMustBeAtLeastTwo) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1, grid_points: 1}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:49: parameters.x.grid_points: must be >= 2, got 1"));
}

TEST(ExperimentLoaderTest, GridPointsNotAllowedOnCategorical) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  act: {type: categorical, values: [a, b], grid_points: 3}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:4:44: parameters.act.grid_points: not allowed "
                                     "with type: categorical")));
}

TEST(ExperimentLoaderTest, MissingTypeIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  x: {min: 0, max: 1}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:3: parameters.x.type: required key is missing"));
}

TEST(ExperimentLoaderTest, BadParameterNameIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  2lr: {type: float, min: 0, max: 1}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:4:3: parameters.2lr: invalid parameter name")));
}

TEST(ExperimentLoaderTest, ZeroParametersIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:3:1: parameters: the search space has no dimensions"));
}

TEST(ExperimentLoaderTest, ConditionOnUnknownParameterIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1, when: {optimizer: sgd}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:43: parameters.x.when.optimizer: no parameter named "
                          "'optimizer'"));
}

TEST(ExperimentLoaderTest, ConditionOnItselfIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  opt: {type: categorical, values: [sgd, adam], when: {opt: sgd}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:56: parameters.opt.when.opt: a parameter cannot depend on "
                          "itself"));
}

TEST(ExperimentLoaderTest, ConditionOnFloatIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  lr: {type: float, min: 0, max: 1}
  mom: {type: float, min: 0, max: 1, when: {lr: 0.5}}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:5:45: parameters.mom.when.lr: 'lr' is a float")));
}

TEST(ExperimentLoaderTest, ConditionValueMustBeOneOfTheValues) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  opt: {type: categorical, values: [sgd, adam]}
  mom: {type: float, min: 0, max: 1, when: {opt: rmsprop}}
  width: {type: int, min: 1, max: 4}
  drop: {type: float, min: 0, max: 1, when: {width: 9}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:5:50: parameters.mom.when.opt: 'rmsprop' is not one of opt's "
                          "values (sgd, adam)",
                          "exp.yaml:7:53: parameters.drop.when.width: '9' is not an integer in "
                          "width's range [1, 4]"));
}

TEST(ExperimentLoaderTest, ConditionCycleIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  a: {type: categorical, values: [p, q], when: {b: r}}
  b: {type: categorical, values: [r, s], when: {a: p}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:5:49: parameters.b.when.a: conditions form a cycle"));
}

TEST(ExperimentLoaderTest, UnknownSamplerIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search:
  sampler: annealing
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:5:12: search.sampler: unknown sampler 'annealing'; expected "
                          "one of random, grid, sobol, bayesian, tpe, nsga2"));
}

TEST(ExperimentLoaderTest, UnknownSchedulerIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {scheduler: pbt}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:4:21: search.scheduler: unknown scheduler 'pbt'")));
}

TEST(ExperimentLoaderTest, SchedulerNeedsFidelity) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {scheduler: hyperband}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:21: search.fidelity: required with scheduler: hyperband"));
}

TEST(ExperimentLoaderTest, FidelityBoundsAndReductionFactorAreChecked) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search:
  scheduler: asha
  fidelity: {name: epoch, min: 0, max: 27, reduction_factor: 1}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:6:32: search.fidelity.min: must be > 0, got 0",
                          "exp.yaml:6:62: search.fidelity.reduction_factor: must be >= 2, got 1"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search:
  scheduler: asha
  fidelity: {name: epoch, min: 9, max: 3}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:6:32: search.fidelity.min: must be less than max (min 9, "
                          "max 3)"));
}

TEST(ExperimentLoaderTest, WrongTypesNameTheKey) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  x: {type: float, min: [1], max: 2}
search:
  max_trials: lots
  max_concurrent: 0
  seed: -1
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:4:25: parameters.x.min: expected a number, got a list",
                          "exp.yaml:6:15: search.max_trials: expected an integer, got 'lots'",
                          "exp.yaml:7:19: search.max_concurrent: must be >= 1, got 0",
                          "exp.yaml:8:9: search.seed: expected a non-negative integer, got '-1'"));
}

TEST(ExperimentLoaderTest, KeyWithoutValuePointsAtTheKey) {
  EXPECT_THAT(Errors(R"(
name: t
objective:
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:2:1: objective: expected a mapping, got no value"));
}

TEST(ExperimentLoaderTest, TrialNeedsCommandOrBuiltin) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial:
  timeout: 30s
)"),
              ElementsAre(StartsWith("exp.yaml:4:1: trial.command: required key is missing")));
}

TEST(ExperimentLoaderTest, MissingTrialIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
)"),
              ElementsAre("exp.yaml:1:1: trial: required key is missing"));
}

TEST(ExperimentLoaderTest, EmptyCommandIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial:
  command: []
)"),
              ElementsAre("exp.yaml:5:12: trial.command: must not be empty"));
}

TEST(ExperimentLoaderTest, PlaceholderMustNameAParameter) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial:
  command: [run, "--x=${x}", "--y=${y}", "--z=${x"]
  env: {Y: "${why}"}
)"),
              ElementsAre("exp.yaml:5:30: trial.command[2]: '${y}' names no parameter "
                          "(declared: x)",
                          "exp.yaml:5:42: trial.command[3]: unterminated '${' (write ${name})",
                          "exp.yaml:6:12: trial.env.Y: '${why}' names no parameter "
                          "(declared: x)"));
}

TEST(ExperimentLoaderTest, BadTimeoutIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial:
  command: [run]
  timeout: ten minutes
)"),
              ElementsAre(StartsWith("exp.yaml:6:12: trial.timeout: invalid duration")));
}

TEST(ExperimentLoaderTest, BudgetMustBePositive) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
budget: {max_cost: 0, max_wall_time: soon}
)"),
              ElementsAre("exp.yaml:5:20: budget.max_cost: must be > 0, got 0",
                          StartsWith("exp.yaml:5:38: budget.max_wall_time: invalid duration")));
}

TEST(ExperimentLoaderTest, PoolsAreChecked) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
resources:
  provider: aws
  pools:
    - {name: a, market: preemptible}
    - {name: b, min_instances: 3, max_instances: 2}
    - {name: a, max_instances: 0}
)"),
              ElementsAre(StartsWith("exp.yaml:6:13: resources.provider: unknown provider 'aws'"),
                          "exp.yaml:8:25: resources.pools[0].market: unknown market "
                          "'preemptible'; expected one of spot, on_demand, reserved",
                          "exp.yaml:9:32: resources.pools[1].min_instances: must be <= "
                          "max_instances (2), got 3",
                          "exp.yaml:10:14: resources.pools[2].name: duplicate pool 'a'",
                          "exp.yaml:10:32: resources.pools[2].max_instances: must be >= 1, got 0"));
}

TEST(ExperimentLoaderTest, BuiltinTrainerModelDatasetAndArgsAreChecked) {
  EXPECT_THAT(
      Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: resnet, dataset: cifar, args: {lr: "0.1", widht: "3"}}}
parameters: {lr: {type: float, min: 0.001, max: 0.1}}
)"),
      ElementsAre("exp.yaml:3:26: trial.builtin.model: 'resnet' is not one of: cnn, mlp",
                  "exp.yaml:3:43: trial.builtin.dataset: 'cifar' is not one of: fashion-mnist, "
                  "synthetic",
                  StartsWith("exp.yaml:3:68: trial.builtin.args.widht: not an option of the "
                             "built-in trainer; use one of: batch_size,")));
}

// Pool and region names become file names (logs, certificates, work folders) and travel
// between hosts: they must be ids.
TEST(ExperimentLoaderTest, PoolAndRegionNamesThatWouldBecomeOtherPathsAreErrors) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
resources:
  pools:
    - {name: ../escape, region: r1}
    - {name: ok, region: "a/b"}
)"),
              ElementsAre("exp.yaml:7:14: resources.pools[0].name: '../escape' is not a pool name: "
                          "at most 128 bytes of [A-Za-z0-9._-]",
                          "exp.yaml:8:26: resources.pools[1].region: 'a/b' is not a region name: "
                          "at most 128 bytes of [A-Za-z0-9._-]"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: "east/1", clients: 2}]
)"),
              ElementsAre("exp.yaml:5:20: federation.regions[0].name: 'east/1' is not a region "
                          "name: at most 128 bytes of [A-Za-z0-9._-]"));
}

TEST(ExperimentLoaderTest, FederationNeedsRegionsWithClients) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation: {rounds: 3}
)"),
              ElementsAre(StartsWith("exp.yaml:4:1: federation.regions: required key is missing")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: []
)"),
              ElementsAre("exp.yaml:5:12: federation.regions: needs at least one region"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 0}]
)"),
              ElementsAre("exp.yaml:5:35: federation.regions[0].clients: must be >= 1, got 0"));
}

TEST(ExperimentLoaderTest, FederationMinClientsAboveTotalIsAnError) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 3}]
  min_clients: 6
  aggregation: mean
  secure_aggregation: sometimes
)"),
              ElementsAre("exp.yaml:6:16: federation.min_clients: must be <= the total number "
                          "of clients (5), got 6",
                          StartsWith("exp.yaml:7:16: federation.aggregation: unknown "
                                     "aggregation 'mean'"),
                          "exp.yaml:8:23: federation.secure_aggregation: expected true or false, "
                          "got 'sometimes'"));
}

TEST(ExperimentLoaderTest, FederationHideRegionSumsNeedsSecureAggregationAndTwoRegions) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 3}]
  hide_region_sums: true
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().hide_region_sums());
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  hide_region_sums: true
)"),
              ElementsAre("exp.yaml:6:21: federation.hide_region_sums: needs at least 2 regions "
                          "(with one region the total is that region's sum)"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 3}]
  secure_aggregation: false
  hide_region_sums: true
)"),
              ElementsAre(StartsWith("exp.yaml:7:21: federation.hide_region_sums: needs "
                                     "secure_aggregation: true")));
}

// Secure aggregation samples at least 2 clients in every region: fewer than 2 x regions a round
// is refused at load, naming the numbers, instead of failing rounds at run time.
TEST(ExperimentLoaderTest, SecureSamplingNeedsTwoClientsPerRegionEachRound) {
  const std::string head = R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
)";
  EXPECT_THAT(Errors(head + "  clients_per_round: 3\n"),
              ElementsAre(AllOf(StartsWith("exp.yaml:6:22: federation.clients_per_round: secure "
                                           "aggregation samples at least 2 clients in each "
                                           "region, so a round needs at least 4 clients (2 x 2 "
                                           "regions); 3 gives 3 of the 8"),
                                HasSubstr("secure_aggregation: false"))));
  EXPECT_THAT(Errors(head + "  clients_per_round: 0.25\n"),
              ElementsAre(HasSubstr("0.25 gives 2 of the 8")));
  EXPECT_TRUE(Load(head + "  clients_per_round: 4\n").ok());
  EXPECT_TRUE(Load(head + "  clients_per_round: 0.5\n").ok());
  EXPECT_TRUE(Load(head + "  clients_per_round: 3\n  secure_aggregation: false\n").ok());
}

// A federated run's pools place its participants: every region needs a pool in it for its
// clients and one for its aggregator, pools must serve a region, the global region must price
// each region's transfer, and a budget must at least start the federation. Keys that would be
// ignored are errors.
// A federated search places every trial's participants on its pools: pools that cannot hold
// one trial's are refused, naming the pool.
TEST(ExperimentLoaderTest, AFederatedSearchsPoolsMustHoldOneTrialsParticipants) {
  const std::string search = R"(
name: t
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.01, max: 0.1}
search: {max_concurrent: 2}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: us-east-1, clients: 2}, {name: eu-west-1, clients: 2}]
resources:
  pools:
    - {name: e, region: us-east-1, instance: gpu.1x, max_instances: 3}
    - {name: w, region: eu-west-1, instance: gpu.1x, hosts: clients, max_instances: 2}
    - {name: w-agg, region: eu-west-1, instance: cpu.small, hosts: aggregator}
)";
  LoadResult r = Load(search);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  std::string small(search);
  small.replace(small.find("max_instances: 3"), 16, "max_instances: 2");
  EXPECT_THAT(Errors(small),
              ElementsAre(AllOf(StartsWith("exp.yaml:11:7: resources.pools[0]:"),
                                HasSubstr("max_instances 2 cannot hold one trial's 3 "
                                          "participants placed on this pool"))));
}

TEST(ExperimentLoaderTest, FederatedPlacementIsCheckedAtLoad) {
  const std::string head = R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: us-east-1, clients: 2}, {name: eu-west-1, clients: 2}]
)";
  const std::string pools = R"(resources:
  pools:
    - {name: e, region: us-east-1, instance: gpu.1x, market: spot}
    - {name: w, region: eu-west-1, instance: gpu.1x, hosts: clients}
    - {name: w-agg, region: eu-west-1, instance: cpu.small, hosts: aggregator}
)";
  EXPECT_TRUE(Load(head + pools).ok()) << Load(head + pools).errors[0].ToString();
  EXPECT_TRUE(Load(head + "  global_region: eu-west-1\n" + pools).ok());
  // An orchestrator outside every region: the built-in catalog prices egress to the internet.
  EXPECT_TRUE(Load(head + "  global_region: internet\n" + pools).ok());
  // No pool for west's aggregator.
  EXPECT_THAT(Errors(head + R"(resources:
  pools:
    - {name: e, region: us-east-1, instance: gpu.1x}
    - {name: w, region: eu-west-1, instance: gpu.1x, hosts: clients}
)"),
              ElementsAre(StartsWith(
                  "exp.yaml:5:51: federation.regions[1].name: region 'eu-west-1' has no pool "
                  "that can host its aggregator (its pools: w); a client never runs outside its "
                  "region")));
  // A region without any pool, and a pool in no region of the federation.
  EXPECT_THAT(Errors(head + R"(resources:
  pools:
    - {name: e, region: us-east-1, instance: gpu.1x}
    - {name: a, region: ap-south-1, instance: gpu.1x}
)"),
              ElementsAre(HasSubstr("region 'eu-west-1' has no pool that can host its clients "
                                    "and its aggregator (no pool of resources.pools is in region "
                                    "'eu-west-1')"),
                          HasSubstr("resources.pools[1].region: 'ap-south-1' is not a region of "
                                    "the federation (eu-west-1, us-east-1)")));
  EXPECT_THAT(Errors(head + "  global_region: mars-1\n" + pools),
              ElementsAre(HasSubstr("federation.global_region: unknown region 'mars-1'")));
  // Slurm places them as jobs; static pools host participants started by hand.
  EXPECT_THAT(Errors(head + "resources:\n  provider: slurm\n" + pools.substr(11)), IsEmpty());
  EXPECT_THAT(Errors(head + "resources:\n  provider: static\n" + pools.substr(11)), IsEmpty());
  // Each region on its own provider: us-east-1 on Slurm, eu-west-1 started by hand.
  const std::string mixed = R"(resources:
  pools:
    - {name: e, region: us-east-1, instance: gpu.1x, provider: slurm}
    - {name: w, region: eu-west-1, instance: gpu.1x, hosts: clients, provider: static}
    - {name: w-agg, region: eu-west-1, instance: cpu.small, hosts: aggregator, provider: static}
)";
  EXPECT_THAT(Errors(head + mixed), IsEmpty());
  // A region half started by hand: its clients would not know where its aggregator is.
  std::string half = mixed;
  half.replace(half.rfind("provider: static"), 16, "provider: local");
  EXPECT_THAT(Errors(head + half),
              ElementsAre(StartsWith("exp.yaml:9:80: resources.pools[1].provider: region "
                                     "'eu-west-1' has static and launching pools")));
  std::string unknown = mixed;
  unknown.replace(unknown.find("provider: slurm"), 15, "provider: kubernetes");
  EXPECT_THAT(Errors(head + unknown),
              ElementsAre(HasSubstr("resources.pools[0].provider: unknown provider 'kubernetes'; "
                                    "expected one of local, slurm, "
                                    "static")));
  // A search's trials start their own participants: nothing is started by hand.
  EXPECT_THAT(Errors(head + "parameters: {local_lr: {type: float, min: 0.01, max: 0.1}}\n" +
                     "search: {max_trials: 2}\n" + mixed),
              Contains(HasSubstr("resources.pools[1].provider: a federated search places its "
                                 "participants with the local or the slurm provider, not static")));
  // `sextant simulate`'s provider runs every pool.
  EXPECT_THAT(Errors(head + "resources:\n  provider: simulated\n" + mixed.substr(11)),
              Contains(HasSubstr("resources.pools[0].provider: resources.provider simulated runs "
                                 "every pool in virtual time")));
  // A budget below the first billing increment of the participants (6 x 60 s of gpu.1x at
  // least); without pools a budget has nothing to bill, nor a global region anything to price.
  EXPECT_THAT(Errors(head + pools + "budget: {max_cost: 0.05}\n"),
              Contains(HasSubstr("budget.max_cost: max_cost 0.05 is less than one round's cost: "
                                 "starting the federation's 6 participants costs at least")));
  EXPECT_THAT(Errors(head + "budget: {max_cost: 5}\n"),
              ElementsAre(HasSubstr("budget.max_cost: a federated run is billed for the "
                                    "instances of resources.pools")));
  EXPECT_THAT(Errors(head + "  global_region: us-east-1\n"),
              ElementsAre(HasSubstr("federation.global_region: prices transfer from the "
                                    "participants' pools; add resources.pools")));
  // hosts outside a federated run would be ignored.
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [echo]}
resources:
  pools: [{name: p, region: us-east-1, instance: gpu.1x, hosts: clients}]
)"),
              ElementsAre(HasSubstr("resources.pools[0].hosts: applies to a federated run's "
                                    "participants")));
}

// simulate: a plain federated run is forecast by rounds (client_seconds, link_mbps, boot_time,
// seed) and a search simulated by trials; each kind's keys are refused in the other.
TEST(ExperimentLoaderTest, SimulateKeysOfTheOtherKindOfRunAreRefused) {
  LoadResult fl = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation: {regions: [{name: east, clients: 2}]}
simulate: {client_seconds: 30s, link_mbps: 50, boot_time: 20s}
)");
  ASSERT_TRUE(fl.ok()) << fl.errors[0].ToString();
  EXPECT_EQ(fl.spec.simulate().client_seconds(), 30);
  EXPECT_EQ(fl.spec.simulate().link_mbps(), 50);
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation: {regions: [{name: east, clients: 2}]}
simulate: {seconds_per_unit: 30s}
)"),
              ElementsAre(HasSubstr("simulate.seconds_per_unit: does not apply to a plain "
                                    "federated run (its forecast takes client_seconds, "
                                    "link_mbps, boot_time and seed)")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [echo]}
simulate: {link_mbps: 10}
)"),
              ElementsAre(HasSubstr("simulate.link_mbps: applies to a plain federated run's "
                                    "forecast, not to a search")));
}

// A catalog without a price between the global region and a region in use is refused.
TEST(ExperimentLoaderTest, FederatedTransferNeedsAPriceForEveryRegionInUse) {
  const std::string dir = ::testing::TempDir() + "/transfer-catalog";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/catalog.yaml") << R"(regions: [a, b]
instances: {big: {gpus: 1, gpu_memory_gb: 80, cpus: 8}}
offers:
  - {region: a, instance: big, market: on_demand, price_per_hour: 1}
  - {region: b, instance: big, market: on_demand, price_per_hour: 1}
)";
  const std::string yaml = R"(name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: a, clients: 2}, {name: b, clients: 2}]
resources:
  catalog: catalog.yaml
  pools: [{name: pa, region: a, instance: big}, {name: pb, region: b, instance: big}]
)";
  std::ofstream(dir + "/exp.yaml") << yaml;
  LoadResult r = LoadExperimentFile(dir + "/exp.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0].ToString(),
              HasSubstr("federation.regions[1].name: the catalog prices no transfer between a "
                        "and b (add transfer.pairs or transfer.between_regions_per_gb)"));
  // An orchestrator on the internet needs each region's egress priced.
  std::string internet = yaml;
  internet.replace(internet.find("resources:"), 0, "  global_region: internet\n");
  std::ofstream(dir + "/exp.yaml") << internet;
  r = LoadExperimentFile(dir + "/exp.yaml");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_THAT(r.errors[0].ToString(),
              HasSubstr("federation.global_region: the catalog prices no transfer from a to the "
                        "internet (add transfer.to_internet_per_gb)"));
}

// A region of one client would hand its aggregator that client's update as the region's sum.
TEST(ExperimentLoaderTest, SecureAggregationNeedsTwoClientsInEveryRegion) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 1}, {name: west, clients: 2}, {name: north, clients: 1}]
)"),
              ElementsAre(AllOf(StartsWith("exp.yaml:5:35: federation.regions[0].clients: secure "
                                           "aggregation needs at least 2 clients in every region; "
                                           "region 'east' has 1"),
                                HasSubstr("secure_aggregation: false")),
                          StartsWith("exp.yaml:5:88: federation.regions[2].clients: secure "
                                     "aggregation needs at least 2 clients in every region; "
                                     "region 'north' has 1")));
  LoadResult plain = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 1}, {name: west, clients: 2}]
  secure_aggregation: false
)");
  EXPECT_TRUE(plain.ok()) << plain.errors[0].ToString();
}

TEST(ExperimentLoaderTest, FederationUpdateCompressionIsNoneByDefaultAndOnlyInt8IsSecure) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.federation().update_compression(), "none");
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  secure_aggregation: false
  update_compression: int8
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.federation().update_compression(), "int8");
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  secure_aggregation: false
  update_compression: int4
)"),
              ElementsAre("exp.yaml:7:23: federation.update_compression: unknown "
                          "update_compression 'int4'; expected one of none, fp16, int8"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  update_compression: fp16
)"),
              ElementsAre(StartsWith("exp.yaml:6:23: federation.update_compression: 'fp16' "
                                     "is a floating-point encoding, and secure aggregation")));
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  update_compression: int8
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().secure_aggregation());
}

TEST(ExperimentLoaderTest, FederationBufferedModeIsLoadedWithDefaultsAndRefusesSyncOnlyKeys) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  secure_aggregation: false
  mode: buffered
  stragglers: {clients: [east/0, west/1], slowdown: 5}
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const v1::Federation& f = r.spec.federation();
  EXPECT_EQ(f.mode(), "buffered");
  EXPECT_EQ(f.buffer_size(), 3);  // half the clients, rounded up
  EXPECT_EQ(f.max_staleness(), 4);
  EXPECT_EQ(f.staleness_weighting(), "polynomial");
  EXPECT_DOUBLE_EQ(f.server_lr(), 3.0 / 5);  // K / clients unless given
  EXPECT_THAT(f.stragglers().clients(), ElementsAre("east/0", "west/1"));
  EXPECT_DOUBLE_EQ(f.stragglers().slowdown(), 5);
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.federation().mode(), "sync");
  EXPECT_DOUBLE_EQ(r.spec.federation().server_lr(), 1);
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  mode: buffered
  server_lr: 0.8
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_DOUBLE_EQ(r.spec.federation().server_lr(), 0.8);  // given: kept
  EXPECT_THAT(
      Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  max_staleness: 2
)"),
      ElementsAre("exp.yaml:6:18: federation.max_staleness: applies to mode: buffered only"));
  // Secure buffered rounds: each region's share of a buffer is one SecAgg instance of >= 2.
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  mode: buffered
  buffer_size: 4
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().secure_aggregation());
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  mode: buffered
  buffer_size: 3
)"),
              ElementsAre(StartsWith("exp.yaml:7:16: federation.buffer_size: secure buffered "
                                     "rounds need buffer_size >= 2 per region (4 here)")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 1}]
  mode: buffered
  buffer_size: 4
)"),
              ElementsAre(StartsWith("exp.yaml:5:61: federation.regions[1].clients: secure "
                                     "aggregation needs at least 2 clients in every region; "
                                     "region 'west' has 1")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 3}, {name: west, clients: 2}]
  mode: buffered
  buffer_size: 4
  hide_region_sums: true
)"),
              ElementsAre(StartsWith("exp.yaml:8:21: federation.hide_region_sums: does not apply "
                                     "to mode: buffered")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}]
  secure_aggregation: false
  mode: buffered
  round_deadline: 30s
  stragglers: {clients: [east/2], slowdown: 0.5}
)"),
              ElementsAre(StartsWith("exp.yaml:8:19: federation.round_deadline: does not apply "
                                     "to mode: buffered"),
                          StartsWith("exp.yaml:9:26: federation.stragglers.clients[0]: 'east/2' "
                                     "is not a client of the federation"),
                          "exp.yaml:9:45: federation.stragglers.slowdown: must be >= 1, got 0.5"));
}

// Buffered: clients_per_round is how many clients start on each model version; it must fill a
// buffer, and the default server_lr is buffer_size over it.
TEST(ExperimentLoaderTest, BufferedClientsPerRoundStartsThatManyOnEachVersion) {
  const std::string head = R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  secure_aggregation: false
  mode: buffered
  buffer_size: 4
)";
  LoadResult r = Load(head + "  clients_per_round: 4\n");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_DOUBLE_EQ(r.spec.federation().clients_per_round(), 4);
  EXPECT_DOUBLE_EQ(r.spec.federation().server_lr(), 1.0);  // K / clients training at once
  r = Load(head + "  clients_per_round: 0.75\n");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_DOUBLE_EQ(r.spec.federation().server_lr(), 4.0 / 6);
  r = Load(head);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_DOUBLE_EQ(r.spec.federation().server_lr(), 0.5);  // every client trains: 4 / 8
  EXPECT_THAT(Errors(head + "  clients_per_round: 3\n"),
              ElementsAre("exp.yaml:9:22: federation.clients_per_round: under mode: buffered, "
                          "clients_per_round is how many clients start training on each model "
                          "version; 3 of them cannot fill a buffer of buffer_size 4 (raise it to "
                          "at least 4, or lower buffer_size)"));
}

TEST(ExperimentLoaderTest, FederationClientSelectionNeedsSynchronousRoundsThatTimeTheirClients) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  client_selection: power_of_choice
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.federation().client_selection(), "power_of_choice");
  r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  client_selection: fastest
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();  // secure rounds time their clients too
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}, {name: west, clients: 4}]
  hide_region_sums: true
  client_selection: fastest
)"),
              ElementsAre(StartsWith("exp.yaml:7:21: federation.client_selection: 'fastest' "
                                     "needs each client's delivery time")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  mode: buffered
  client_selection: fastest
)"),
              ElementsAre(StartsWith("exp.yaml:8:21: federation.client_selection: applies to "
                                     "synchronous rounds")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  client_selection: slowest
)"),
              ElementsAre(StartsWith("exp.yaml:6:21: federation.client_selection: unknown")));
}

TEST(ExperimentLoaderTest, FederationDpIsLoadedWithDefaults) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  dp: {noise_multiplier: 1.1, clip_norm: 0.5, target_epsilon: 8, noise: distributed}
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  const v1::DifferentialPrivacy& dp = r.spec.federation().dp();
  EXPECT_DOUBLE_EQ(dp.noise_multiplier(), 1.1);
  EXPECT_DOUBLE_EQ(dp.clip_norm(), 0.5);
  EXPECT_DOUBLE_EQ(dp.delta(), 1e-5);
  EXPECT_DOUBLE_EQ(dp.target_epsilon(), 8);
  EXPECT_EQ(dp.noise(), "distributed");
  EXPECT_FALSE(Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
)")
                   .spec.federation()
                   .has_dp());
}

TEST(ExperimentLoaderTest, FederationDpBadSettingsNameTheField) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  dp: {clip_norm: -1, delta: 2, noise: local, sigma: 3}
)"),
              ElementsAre("exp.yaml:7:3: federation.dp.noise_multiplier: required key is missing",
                          "exp.yaml:7:19: federation.dp.clip_norm: must be > 0, got -1",
                          "exp.yaml:7:30: federation.dp.delta: must be < 1 (a probability), got 2",
                          "exp.yaml:7:40: federation.dp.noise: unknown noise 'local'; expected "
                          "one of central, distributed",
                          StartsWith("exp.yaml:7:47: federation.dp.sigma: unknown key")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  dp: {noise_multiplier: 1, clip_norm: 1, noise: distributed}
)"),
              ElementsAre(StartsWith("exp.yaml:7:50: federation.dp.noise: distributed noise "
                                     "needs secure_aggregation: true")));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 4}]
  secure_aggregation: false
  aggregation: median
  dp: {noise_multiplier: 1, clip_norm: 1}
)"),
              ElementsAre(StartsWith("exp.yaml:8:7: federation.dp: differential privacy needs "
                                     "aggregation: fedavg")));
}

TEST(ExperimentLoaderTest, CollectsEveryErrorInDocumentOrder) {
  LoadResult r = Load(R"(
name: BAD
objective: {metric: loss, goal: up}
parameters:
  lr: {type: float, min: 0, max: 1, log: true}
  act: {type: categorical, values: [relu]}
search: {sampler: annealing, max_trials: 0}
trial:
  command: [run, "${nope}"]
colour: blue
)");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.spec.name(), "");  // the spec is cleared on error
  std::vector<std::string> errors;
  for (const LoadError& e : r.errors) errors.push_back(e.ToString());
  EXPECT_THAT(errors, ElementsAre(StartsWith("exp.yaml:1:7: name:"),
                                  StartsWith("exp.yaml:2:33: objective.goal:"),
                                  StartsWith("exp.yaml:4:26: parameters.lr.min: must be > 0"),
                                  StartsWith("exp.yaml:5:36: parameters.act.values:"),
                                  StartsWith("exp.yaml:6:19: search.sampler:"),
                                  StartsWith("exp.yaml:6:42: search.max_trials:"),
                                  StartsWith("exp.yaml:8:18: trial.command[1]:"),
                                  StartsWith("exp.yaml:9:1: colour: unknown key")));
}

TEST(ExperimentLoaderTest, MalformedYamlIsOneErrorAtTheParserPosition) {
  EXPECT_THAT(Errors(R"(
name: t
parameters: {x: {type: float, min: 0, max: 1}
trial: {command: [run]}
)"),
              ElementsAre(MatchesRegex(R"(exp\.yaml:[0-9]+:[0-9]+: invalid YAML: .+)")));
  EXPECT_THAT(Errors("name: t\n  objective: x\n"),
              ElementsAre("exp.yaml:2:12: invalid YAML: illegal map value"));
}

// yaml-cpp's LoadAll yields empty documents forever on this input (found by loader_fuzz).
TEST(ExperimentLoaderTest, TextTheYamlParserCannotGetPastIsAnErrorNotAHang) {
  EXPECT_THAT(Errors(",&a [*a]\n"),
              ElementsAre("exp.yaml:1:1: invalid YAML: the parser cannot get past this point"));
}

TEST(ExperimentLoaderTest, EmptyOrNonMappingDocumentIsAnError) {
  EXPECT_THAT(Errors(""), ElementsAre("exp.yaml:1:1: the experiment file is empty"));
  EXPECT_THAT(Errors("- a\n- b\n"), ElementsAre("exp.yaml:1:1: expected a mapping, got a list"));
}

TEST(ExperimentLoaderTest, FileThatCannotBeReadIsOneError) {
  LoadResult r = LoadExperimentFile("/nonexistent/sextant/exp.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].ToString(),
            "/nonexistent/sextant/exp.yaml:0:0: cannot read: No such file or directory");
}

TEST(ExperimentLoaderTest, LoadsAFileAndResolvesWorkingDirBesideIt) {
  char dir[] = "/tmp/experiment_loader_test_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/exp.yaml";
  std::ofstream(path) << kFullExample.substr(1);
  LoadResult r = LoadExperimentFile(path);
  std::remove(path.c_str());
  rmdir(dir);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.source_path(), path);
  EXPECT_EQ(r.spec.trial().working_dir(), std::string(dir) + "/src");
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

constexpr std::string_view kCostHead = R"(
name: t
objective: {metric: loss}
parameters: {x0: {type: float, min: 0, max: 1}, x1: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)";

TEST(ExperimentLoaderCostTest, PoolsMustNameCatalogOffersAndBudgetMustCoverOneIncrement) {
  EXPECT_THAT(
      Errors(std::string(kCostHead) + R"(budget: {max_cost: 0.01}
resources:
  pools:
    - {name: a, region: mars-1, instance: gpu.1x, market: spot}
    - {name: b, region: us-east-1, instance: gpu.3x}
    - {name: c, region: us-east-1, instance: gpu.1x, market: spot, min_instances: 2, max_instances: 1}
)"),
      ElementsAre("exp.yaml:5:20: budget.max_cost: max_cost 0.01 is less than one billing "
                  "increment of the cheapest pool (0.012)",
                  StartsWith("exp.yaml:8:25: resources.pools[0].region: unknown region 'mars-1' "
                             "(the built-in catalog has us-east-1, eu-west-1, ap-south-1"),
                  StartsWith("exp.yaml:9:46: resources.pools[1].instance: unknown instance type "
                             "'gpu.3x'"),
                  "exp.yaml:10:83: resources.pools[2].min_instances: must be <= max_instances "
                  "(1), got 2"));
}

TEST(ExperimentLoaderCostTest, CatalogFileErrorsNameTheCatalogFile) {
  char dir_template[] = "/tmp/sextant-catalog-XXXXXX";
  std::string dir = mkdtemp(dir_template);
  {
    std::ofstream f(dir + "/prices.yaml");
    f << "regions: [r1]\ninstances: {box: {gpus: 1, gpu_memory_gb: 24, cpus: 8}}\n"
         "offers:\n  - {region: r1, instance: box, market: spot, price_per_hour: -2}\n";
  }
  LoadResult r = LoadExperimentFromString(std::string(kCostHead.substr(1)) + R"(resources:
  catalog: prices.yaml
  pools: [{name: a, region: r1, instance: box, market: spot}]
)",
                                          dir + "/exp.yaml");
  std::vector<std::string> errors;
  for (const LoadError& e : r.errors) errors.push_back(e.ToString());
  EXPECT_THAT(errors,
              ElementsAre(dir + "/prices.yaml:4:63: offers[0].price_per_hour: must be > 0, got -2",
                          StartsWith(dir + "/exp.yaml:6:12: resources.catalog: the catalog")));
  std::remove((dir + "/prices.yaml").c_str());
  rmdir(dir.c_str());
}

TEST(ExperimentLoaderCostTest, PlacementPerTrialAndSimulateBlocksAreLoaded) {
  LoadResult r = Load(std::string(kCostHead) + R"(resources:
  provider: simulated
  idle_timeout: 2m
  placement: {policy: mixed, preemption_cooldown: 15m}
  per_trial: {gpus: 1, gpu_memory_gb: 40, cpus: 8, checkpoints: false}
  pools: [{name: a, region: eu-west-1, instance: gpu.4x, market: reserved, max_instances: 3}]
simulate: {seconds_per_unit: 10m, attempt_overhead: 0s, objective: branin, noise: 0, boot_time: 2m, seed: 9}
)");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::Resources& res = r.spec.resources();
  EXPECT_EQ(res.idle_timeout_seconds(), 120);
  EXPECT_EQ(res.placement().policy(), "mixed");
  EXPECT_EQ(res.placement().preemption_cooldown_seconds(), 900);
  EXPECT_EQ(res.per_trial().gpu_memory_gb(), 40);
  EXPECT_FALSE(res.per_trial().checkpoints());
  EXPECT_EQ(res.pools(0).market(), v1::Pool::RESERVED);
  const v1::Simulation& sim = r.spec.simulate();
  EXPECT_EQ(sim.seconds_per_unit(), 600);
  EXPECT_TRUE(sim.has_attempt_overhead_seconds());
  EXPECT_EQ(sim.attempt_overhead_seconds(), 0);
  EXPECT_EQ(sim.objective(), "branin");
  EXPECT_EQ(sim.boot_seconds(), 120);
  EXPECT_EQ(sim.seed(), 9u);
  EXPECT_FALSE(sim.has_checkpoint_seconds());
}

TEST(ExperimentLoaderCostTest, BadPlacementAndSimulateValuesAreErrors) {
  EXPECT_THAT(Errors(std::string(kCostHead) + R"(resources:
  placement: {policy: greedy}
  per_trial: {gpus: 16}
  pools: [{name: a, region: us-east-1, instance: gpu.8x}]
simulate: {seconds_per_unit: 0s, objective: rosenbrock, colour: 1}
)"),
              ElementsAre(StartsWith("exp.yaml:6:23: resources.placement.policy: unknown policy "
                                     "'greedy'"),
                          "exp.yaml:8:50: resources.pools[0].instance: instance type gpu.8x "
                          "cannot hold one trial (resources.per_trial)",
                          "exp.yaml:9:30: simulate.seconds_per_unit: must be > 0",
                          StartsWith("exp.yaml:9:45: simulate.objective: unknown objective"),
                          StartsWith("exp.yaml:9:57: simulate.colour: unknown key")));
}

// A folder with a model file written byte by byte in the safetensors layout (u64 header length,
// JSON header, data) and an experiment beside it.
class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir() + "/loader-model-" +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name())
               .lexically_normal()
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/models");
  }
  void PutModel(const std::string& name, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    bytes += header + std::string(data_bytes, '\0');
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  LoadResult LoadWith(const std::string& model_yaml, bool command = true) {
    const std::string path = dir_ + "/exp.yaml";
    std::ofstream(path) << "name: t\n"
                        << "objective: {metric: loss}\n"
                        << "federation:\n"
                        << "  regions: [{name: east, clients: 2}]\n"
                        << (command ? "  client_command: [python3, client.py]\n" : "")
                        << "  model: " << model_yaml << "\n";
    return LoadExperimentFile(path);
  }
  std::vector<std::string> ErrorsWith(const std::string& model_yaml, bool command = true) {
    std::vector<std::string> out;
    for (const LoadError& e : LoadWith(model_yaml, command).errors) out.push_back(e.ToString());
    return out;
  }
  std::string dir_;
};

TEST_F(ModelFileTest, ReadsTheLayoutFromTheHeaderAndResolvesThePathBesideTheFile) {
  PutModel("models/init.safetensors",
           R"({"fc1.weight":{"dtype":"BF16","shape":[3,2],"data_offsets":[0,12]},)"
           R"("fc1.bias":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
           20);
  LoadResult r = LoadWith("{file: models/init.safetensors}");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::Federation& f = r.spec.federation();
  EXPECT_EQ(
      f.model_file(),
      std::filesystem::absolute(dir_ + "/models/init.safetensors").lexically_normal().string());
  ASSERT_EQ(f.model_layout_size(), 2);
  EXPECT_EQ(f.model_layout(0).name(), "fc1.weight");
  EXPECT_EQ(f.model_layout(0).dtype(), "BF16");
  EXPECT_THAT(f.model_layout(0).shape(), ElementsAre(3, 2));
  EXPECT_EQ(f.model_layout(1).name(), "fc1.bias");
  EXPECT_EQ(f.model_layout(1).dtype(), "F32");
  EXPECT_THAT(f.model_layout(1).shape(), ElementsAre(2));
}

TEST_F(ModelFileTest, AMissingFileIsAnErrorAtTheField) {
  EXPECT_THAT(ErrorsWith("{file: nope.safetensors}"),
              ElementsAre(AllOf(StartsWith(dir_ + "/exp.yaml:6:17: federation.model.file: "),
                                HasSubstr("nope.safetensors: cannot open"))));
}

TEST_F(ModelFileTest, AnUnsupportedDtypeNamesTheTensor) {
  PutModel("m.safetensors", R"({"emb":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8);
  EXPECT_THAT(ErrorsWith("{file: m.safetensors}"),
              ElementsAre(AllOf(StartsWith(dir_ + "/exp.yaml:6:17: federation.model.file: "),
                                HasSubstr("tensor \"emb\": dtype \"F64\" is not supported"))));
}

TEST_F(ModelFileTest, AHeaderThatPromisesMoreThanTheFileHoldsIsAnError) {
  PutModel("m.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_THAT(ErrorsWith("{file: m.safetensors}"),
              ElementsAre(HasSubstr("federation.model.file: " + dir_ +
                                    "/m.safetensors: tensor \"w\": data_offsets [0,16] go past "
                                    "the end of the 8-byte data buffer")));
}

TEST_F(ModelFileTest, UnknownKeysAndAMissingFileKeyAreErrors) {
  PutModel("m.safetensors", R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
  EXPECT_THAT(ErrorsWith("{file: m.safetensors, dtype: f16}"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:6:32: federation.model.dtype: unknown key; "
                                            "allowed keys: file")));
  EXPECT_THAT(ErrorsWith("{}"),
              ElementsAre(dir_ + "/exp.yaml:6:3: federation.model.file: required key is missing"));
}

TEST_F(ModelFileTest, AModelOfYourOwnNeedsAClientCommand) {
  PutModel("m.safetensors", R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4);
  EXPECT_THAT(ErrorsWith("{file: m.safetensors}", /*command=*/false),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:5:17: federation.model.file: a model of "
                                            "your own needs federation.client_command")));
}

// federation.data: own beside a model of your own (m.safetensors) and site folders.
class OwnDataTest : public ModelFileTest {
 protected:
  void SetUp() override {
    ModelFileTest::SetUp();
    PutModel("m.safetensors", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
    for (const char* site : {"sites/east-0", "sites/east-1", "sites/west-0", "sites/west-1"}) {
      std::filesystem::create_directories(dir_ + "/" + site);
    }
  }
  // The experiment: regions east and west (2 clients each), then `lines` (from line 6).
  LoadResult LoadLines(const std::string& lines) {
    const std::string path = dir_ + "/exp.yaml";
    std::ofstream(path) << "name: t\nobjective: {metric: loss}\ntrial: {builtin: {model: mlp}}\n"
                        << "federation:\n"
                        << "  regions: [{name: east, clients: 2}, {name: west, clients: 2}]\n"
                        << lines;
    return LoadExperimentFile(path);
  }
  std::vector<std::string> ErrorsOf(const std::string& lines) {
    std::vector<std::string> out;
    for (const LoadError& e : LoadLines(lines).errors) out.push_back(e.ToString());
    return out;
  }
  static constexpr const char* kOwn =
      "  data: own\n  client_command: [python3, client.py]\n  model: {file: m.safetensors}\n";
};

TEST_F(OwnDataTest, FashionMnistIsTheDefaultAndOwnExpandsTheDataDirPerClient) {
  LoadResult plain = LoadLines("  client_command: [python3, client.py]\n");
  ASSERT_THAT(plain.errors, IsEmpty()) << plain.errors[0].ToString();
  EXPECT_EQ(plain.spec.federation().data(), "fashion-mnist");
  EXPECT_THAT(plain.spec.federation().client_data_dirs(), IsEmpty());
  LoadResult r = LoadLines(std::string(kOwn) +
                           "  data_dir: sites/{region}-{index}\n"
                           "  evaluate_command: [python3, eval.py]\n");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::Federation& f = r.spec.federation();
  EXPECT_EQ(f.data(), "own");
  const std::string sites = std::filesystem::absolute(dir_ + "/sites").lexically_normal().string();
  EXPECT_THAT(f.client_data_dirs(), ElementsAre(sites + "/east-0", sites + "/east-1",
                                                sites + "/west-0", sites + "/west-1"));
  EXPECT_THAT(f.evaluate_command(), ElementsAre("python3", "eval.py"));
}

TEST_F(OwnDataTest, AnUnknownDataSourceIsAnErrorAtTheField) {
  EXPECT_THAT(ErrorsOf("  data: bogus\n  client_command: [python3, client.py]\n"),
              ElementsAre(AllOf(StartsWith(dir_ + "/exp.yaml:6:9: federation.data: "),
                                HasSubstr("'bogus'"), HasSubstr("fashion-mnist"))));
}

TEST_F(OwnDataTest, OwnDataNeedsAClientCommandAndAModelOfYourOwn) {
  EXPECT_THAT(ErrorsOf("  data: own\n  model: {file: m.safetensors}\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:6:9: federation.data: own needs "
                                            "federation.client_command"),
                          StartsWith(dir_ + "/exp.yaml:7:17: federation.model.file: a model of "
                                            "your own needs federation.client_command")));
  EXPECT_THAT(ErrorsOf("  data: own\n  client_command: [python3, client.py]\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:6:9: federation.data: own needs a model "
                                            "of your own (federation.model.file)")));
}

TEST_F(OwnDataTest, AMissingDataDirNamesTheClientAndTheFolder) {
  std::filesystem::remove_all(dir_ + "/sites/east-1");
  EXPECT_THAT(ErrorsOf(std::string(kOwn) + "  data_dir: sites/{region}-{index}\n"),
              ElementsAre(dir_ +
                          "/exp.yaml:9:13: federation.data_dir: client east/1's data "
                          "folder " +
                          std::filesystem::absolute(dir_).lexically_normal().string() +
                          "/sites/east-1 does not exist"));
}

TEST_F(OwnDataTest, ADataDirMustGiveEveryClientItsOwnFolderAndKnownPlaceholders) {
  EXPECT_THAT(ErrorsOf(std::string(kOwn) + "  data_dir: sites/{region}\n"),
              ElementsAre(AllOf(StartsWith(dir_ + "/exp.yaml:9:13: federation.data_dir: gives "
                                                  "clients east/0 and east/1 the same folder"),
                                HasSubstr("put {index}"))));
  EXPECT_THAT(ErrorsOf(std::string(kOwn) + "  data_dir: sites/{site}-{index}\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:9:13: federation.data_dir: '{site}' is "
                                            "not a placeholder; use {region} and {index}")));
}

TEST_F(OwnDataTest, FashionMnistKeysDataDirAndEvaluateCommandAreRefusedWhereTheyDoNotApply) {
  EXPECT_THAT(ErrorsOf(std::string(kOwn) + "  partition: dirichlet\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:9:3: federation.partition: applies to "
                                            "data: fashion-mnist")));
  EXPECT_THAT(ErrorsOf("  client_command: [python3, client.py]\n"
                       "  data_dir: sites/{region}-{index}\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:7:3: federation.data_dir: applies to "
                                            "data: own")));
  EXPECT_THAT(ErrorsOf("  client_command: [python3, client.py]\n"
                       "  evaluate_command: [python3, eval.py]\n"),
              ElementsAre(StartsWith(dir_ + "/exp.yaml:7:21: federation.evaluate_command: needs "
                                            "a model of your own")));
}

TEST(ExperimentLoaderTest, FederationRobustRuleWithSecureAggregationIsRefusedWithTheReason) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 5}]
  aggregation: krum
)"),
              ElementsAre(StartsWith("exp.yaml:6:16: federation.aggregation: 'krum' needs each "
                                     "client's update in the clear, which secure aggregation "
                                     "hides")));
}

TEST(ExperimentLoaderTest, FederationRobustRuleParametersAndClientCommand) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 5}]
  aggregation: trimmed_mean
  trim_fraction: 0.2
  byzantine_clients: 2
  krum_selected: 3
  secure_aggregation: false
  client_command: [/usr/bin/python3, train.py, --epochs, "1"]
)");
  ASSERT_THAT(r.errors, IsEmpty()) << r.errors[0].ToString();
  const v1::Federation& f = r.spec.federation();
  EXPECT_EQ(f.aggregation(), "trimmed_mean");
  EXPECT_DOUBLE_EQ(f.trim_fraction(), 0.2);
  EXPECT_EQ(f.byzantine_clients(), 2);
  EXPECT_EQ(f.krum_selected(), 3);
  EXPECT_THAT(f.client_command(), ElementsAre("/usr/bin/python3", "train.py", "--epochs", "1"));
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 5}]
  aggregation: trimmed_mean
  trim_fraction: 0.5
  secure_aggregation: false
)"),
              ElementsAre("exp.yaml:7:18: federation.trim_fraction: must be < 0.5 (a fraction "
                          "cut at each end), got 0.5"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

constexpr std::string_view kTwoObjectives = R"(
name: mo
objectives:
  - {metric: val_accuracy, goal: maximize, reference: 0.5}
  - {metric: trial_seconds, goal: minimize}
constraints:
  - {metric: latency_ms, max: 20}
  - {metric: model_mb, min: 1, max: 50}
parameters:
  width: {type: int, min: 16, max: 512}
search: {sampler: nsga2, max_trials: 10}
trial: {command: [run]}
)";

TEST(ExperimentLoaderTest, ObjectivesAndConstraintsLoadInOrder) {
  LoadResult r = Load(kTwoObjectives);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  ASSERT_EQ(r.spec.objectives_size(), 2);
  EXPECT_EQ(r.spec.objectives(0).metric(), "val_accuracy");
  EXPECT_EQ(r.spec.objectives(0).goal(), v1::Objective::MAXIMIZE);
  EXPECT_DOUBLE_EQ(r.spec.objectives(0).reference(), 0.5);
  EXPECT_FALSE(r.spec.objectives(1).has_reference());
  EXPECT_FALSE(r.spec.has_objective());
  ASSERT_EQ(r.spec.constraints_size(), 2);
  EXPECT_DOUBLE_EQ(r.spec.constraints(0).max(), 20);
  EXPECT_FALSE(r.spec.constraints(0).has_min());
  EXPECT_DOUBLE_EQ(r.spec.constraints(1).min(), 1);
  EXPECT_EQ(r.spec.search().sampler(), v1::Search::NSGA2);
}

TEST(ExperimentLoaderTest, ObjectivesMisuseIsAnErrorNamingTheKey) {
  EXPECT_THAT(Errors(R"(
name: mo
objective: {metric: loss}
objectives: [{metric: a}, {metric: b}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:3:1: objectives: give either objective")));
  EXPECT_THAT(
      Errors(R"(
name: mo
objectives: [{metric: a}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
      ElementsAre(HasSubstr("objectives: needs 2 to 4 entries, got 1 (for one, use objective:)")));
  EXPECT_THAT(Errors(R"(
name: mo
objectives: [{metric: a}, {metric: b, goal: maximize}, {metric: a}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(AllOf(
                  StartsWith("exp.yaml:2:"),
                  HasSubstr("objectives[2]: metric 'a' is already an objective (objectives[0])"))));
  EXPECT_THAT(Errors(R"(
name: mo
objectives: [{metric: a}, {metric: b, target: 3}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(HasSubstr("objectives[1].target: unknown key")));
}

TEST(ExperimentLoaderTest, ConstraintNeedsABound) {
  EXPECT_THAT(Errors(R"(
name: mo
objective: {metric: loss}
constraints: [{metric: latency_ms}, {metric: mb, min: 5, max: 1}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(HasSubstr("constraints[0]: needs max or min"),
                          HasSubstr("constraints[1].min: must not exceed max")));
}

TEST(ExperimentLoaderTest, SearchOptionsThatNeedOneOrSeveralObjectives) {
  EXPECT_THAT(
      Errors(R"(
name: so
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: nsga2}
trial: {command: [run]}
)"),
      ElementsAre(StartsWith("exp.yaml:4:19: search.sampler: nsga2 needs several objectives")));
  EXPECT_THAT(Errors(R"(
name: so
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: tpe, cost_aware: true}
trial: {command: [run]}
)"),
              ElementsAre(HasSubstr("search.cost_aware: cost_aware needs sampler: bayesian")));
  EXPECT_THAT(Errors(R"(
name: mo
objectives: [{metric: a}, {metric: b}]
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: bayesian, cost_aware: true, scheduler: median, fidelity: {name: e, min: 1, max: 9}}
trial: {command: [run]}
)"),
              ElementsAre(HasSubstr("search.cost_aware: cost_aware is for one objective"),
                          HasSubstr("search.scheduler: median stopping compares one value")));
}

TEST(ExperimentLoaderTest, CostObjectiveUnderUnbilledLocalRunSaysItIsAlwaysZero) {
  EXPECT_THAT(Errors(R"(
name: mo
objectives: [{metric: loss}, {metric: cost}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre(HasSubstr("objectives: objectives[1]: cost is always 0 under the local "
                                    "provider without pools")));
  EXPECT_TRUE(Load(R"(
name: mo
objectives: [{metric: loss}, {metric: cost}]
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
resources:
  provider: simulated
  pools: [{name: p, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 2}]
)")
                  .ok());
}

TEST(ExperimentLoaderTest, TimePerUnitExpressionIsCheckedAgainstTheSpace) {
  const std::string head = R"(name: sim
objective: {metric: loss}
parameters:
  width: {type: int, min: 16, max: 512}
  act: {type: categorical, values: [relu, tanh]}
trial: {command: [run]}
simulate:
  seconds_per_unit_expression: )";
  LoadResult ok = Load(head + "\"20 + 0.5 * width\"\n");
  ASSERT_TRUE(ok.ok()) << ok.errors[0].ToString();
  EXPECT_EQ(ok.spec.simulate().seconds_per_unit_expression(), "20 + 0.5 * width");
  EXPECT_THAT(Errors(head + "\"20 + depth\"\n"),
              ElementsAre(AllOf(StartsWith("exp.yaml:8:32: simulate.seconds_per_unit_expression:"),
                                HasSubstr("depth"), HasSubstr("numeric parameters: width"))));
  EXPECT_THAT(Errors(head + "\"100 - width\"\n"),
              ElementsAre(HasSubstr("must be a positive number of seconds everywhere in the space; "
                                    "at the centre it is -164")));
}

// The names Optuna (and Ray Tune) use map to ours, rather than to whatever is spelt alike
// (Optuna's `low` is one letter from `log`).
TEST(ExperimentLoaderTest, OptunaKeyNamesSuggestOurs) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss, direction: maximize}
parameters:
  lr: {type: float, low: 0.001, high: 0.1}
  act: {type: categorical, choices: [relu, tanh]}
search: {n_trials: 20}
trial: {command: [run]}
)"),
              ::testing::IsSupersetOf(std::vector<::testing::Matcher<std::string>>{
                  HasSubstr("objective.direction: unknown key; allowed keys: "
                            "metric, goal, target (did you mean 'goal'?)"),
                  HasSubstr("parameters.lr.low: unknown key; allowed keys: "
                            "type, min, max, step, log, values, grid_points, "
                            "when (did you mean 'min'?)"),
                  HasSubstr("parameters.lr.high: unknown key; allowed keys: "
                            "type, min, max, step, log, values, grid_points, "
                            "when (did you mean 'max'?)"),
                  HasSubstr("parameters.act.choices: unknown key; allowed "
                            "keys: type, min, max, step, log, values, "
                            "grid_points, when (did you mean 'values'?)"),
                  AllOf(HasSubstr("search.n_trials: unknown key"),
                        HasSubstr("(did you mean 'max_trials'?)"))}));
}

// Optuna's habits one level up or as a type: the message says where the key goes and what to
// write for the distribution.
TEST(ExperimentLoaderTest, OptunaTopLevelKeysAndDistributionNamesSayWhereAndWhat) {
  EXPECT_THAT(
      Errors(R"(
name: t
objective: {metric: loss}
n_trials: 30
parameters:
  lr: {type: loguniform, min: 0.001, max: 0.1}
trial: {command: [run]}
)"),
      ::testing::IsSupersetOf(std::vector<::testing::Matcher<std::string>>{
          HasSubstr("n_trials: unknown key; allowed keys: name, objective, objectives, "
                    "constraints, parameters, search, trial, budget, resources, "
                    "federation, simulate, privacy (did you mean search.max_trials? it belongs "
                    "under search:)"),
          HasSubstr("parameters.lr.type: unknown type 'loguniform'; expected one of "
                    "float, int, categorical (for 'loguniform' write type: float with "
                    "log: true)")}));
}

TEST(ExperimentLoaderTest, AFractionalIntBoundIsOneErrorNotACascade) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  n_layers: {type: int, min: 1, max: 6.5}
  width: {type: int, min: 16, max: 256, when: {n_layers: 3}}
search:
  max_trials: 4
  enqueue:
    - {n_layers: 3, width: 64}
trial: {command: [run, "${n_layers}"]}
)"),
              ElementsAre("exp.yaml:4:38: parameters.n_layers.max: must be an integer, got 6.5"));
  // Likewise a categorical whose values are missing (Optuna's `choices`).
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  act: {type: categorical, choices: [relu, tanh]}
  slope: {type: float, min: 0, max: 1, when: {act: relu}}
search:
  max_trials: 4
  enqueue:
    - {act: relu, slope: 0.5}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:4:3: parameters.act.values: required key"),
                          StartsWith("exp.yaml:4:28: parameters.act.choices: unknown key")));
}

TEST(ExperimentLoaderTest, BritishSpellingsOfTheGoalsAreAccepted) {
  for (const auto& [goal, want] :
       {std::pair{"minimise", v1::Objective::MINIMIZE}, {"maximise", v1::Objective::MAXIMIZE}}) {
    LoadResult r = Load(absl::StrCat("name: t\nobjective: {metric: acc, goal: ", goal, "}\n",
                                     "parameters: {x: {type: float, min: 0, max: 1}}\n",
                                     "trial: {command: [run]}\n"));
    ASSERT_TRUE(r.ok()) << goal << ": " << r.errors[0].ToString();
    EXPECT_EQ(r.spec.objective().goal(), want) << goal;
  }
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: acc, goal: maximum}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [run]}
)"),
              ElementsAre("exp.yaml:2:32: objective.goal: unknown goal 'maximum'; expected one of "
                          "minimize, maximize"));
}

TEST(ExperimentLoaderTest, ASextantVariableInTheCommandSaysItIsInTheEnvironment) {
  EXPECT_THAT(
      Errors(R"(
name: t
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
trial: {command: [python3, train.py, "--x=${x}", "--id=${SEXTANT_TRIAL_ID}"]}
)"),
      ElementsAre(AllOf(
          StartsWith("exp.yaml:4:50: trial.command[3]: '${SEXTANT_TRIAL_ID}' names no "
                     "parameter (${...} takes parameters only)"),
          HasSubstr("SEXTANT_TRIAL_ID, SEXTANT_ATTEMPT"), HasSubstr("in the trial's environment"),
          HasSubstr("[sh, -c, 'python3 train.py --tag $SEXTANT_TRIAL_ID']"))));
}

TEST(ExperimentLoaderTest, StepIsLoadedForIntsAndFloats) {
  LoadResult r = Load(R"(
name: t
objective: {metric: loss}
parameters:
  n_layers: {type: int, min: 1, max: 8, step: 2}
  dropout: {type: float, min: 0.1, max: 0.5, step: 0.1}
  lr: {type: float, min: 1.0e-4, max: 1.0e-1, log: true}
search:
  max_trials: 4
  enqueue:
    - {n_layers: 7, dropout: 0.3, lr: 0.01}
trial: {command: [run]}
)");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_EQ(r.spec.parameters(0).step(), 2);
  EXPECT_EQ(r.spec.parameters(1).step(), 0.1);
  EXPECT_EQ(r.spec.parameters(2).step(), 0);
  const SearchSpace space = ToSearchSpace(r.spec);
  EXPECT_EQ(space.params[0].step, 2);
  EXPECT_EQ(space.params[1].step, 0.1);
}

TEST(ExperimentLoaderTest, StepIsValidated) {
  EXPECT_THAT(
      Errors(R"(
name: t
objective: {metric: loss}
parameters:
  a: {type: int, min: 1, max: 8, step: 1.5}
  b: {type: int, min: 1, max: 8, step: 0}
  c: {type: float, min: 0, max: 1, step: -0.1}
  d: {type: float, min: 1.0e-3, max: 1, step: 0.1, log: true}
  e: {type: float, min: 0, max: 1, step: 2}
  f: {type: categorical, values: [x, y], step: 1}
trial: {command: [run]}
)"),
      ElementsAre("exp.yaml:4:40: parameters.a.step: must be an integer, got 1.5",
                  "exp.yaml:5:40: parameters.b.step: must be >= 1, got 0",
                  "exp.yaml:6:42: parameters.c.step: must be > 0, got -0.1",
                  StartsWith("exp.yaml:7:41: parameters.d.step: not allowed with log: true"),
                  "exp.yaml:8:42: parameters.e.step: must be at most max - min (1), or "
                  "only min is left",
                  StartsWith("exp.yaml:9:42: parameters.f.step: not allowed with type: "
                             "categorical")));
}

TEST(ExperimentLoaderTest, EnqueuedValuesAndConditionsMustLieOnTheStep) {
  EXPECT_THAT(Errors(R"(
name: t
objective: {metric: loss}
parameters:
  n_layers: {type: int, min: 1, max: 8, step: 2}
  dropout: {type: float, min: 0.1, max: 0.5, step: 0.1}
  width: {type: int, min: 16, max: 256, when: {n_layers: 4}}
search:
  max_trials: 4
  enqueue:
    - {n_layers: 4, dropout: 0.25, width: 64}
trial: {command: [run]}
)"),
              ElementsAre(StartsWith("exp.yaml:6:58: parameters.width.when.n_layers: '4' is not "
                                     "one of n_layers's values (1 + k * 2)"),
                          "exp.yaml:10:18: search.enqueue[0].n_layers: 4 is not on the grid 1 + "
                          "k * 2 (nearest: 3, 5)",
                          "exp.yaml:10:30: search.enqueue[0].dropout: 0.25 is not on the grid 0.1 "
                          "+ k * 0.1 (nearest: 0.2, 0.3)"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// A federated search with DP, the base of the study-privacy cases below.
constexpr char kDpStudy[] = R"(
name: dp-study
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.01, max: 0.1}
search: {sampler: random}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: [{name: east, clients: 3}]
  rounds: 4
  dp: {noise_multiplier: 1.0, clip_norm: 1.0}
)";

TEST(StudyPrivacyLoaderTest, MaxEpsilonAndRandomStoppingLoadForADpSearch) {
  LoadResult r = Load(absl::StrCat(
      kDpStudy, "budget: {max_epsilon: 4.5}\n",
      "privacy: {selection: random_stopping, distribution: truncated_negative_binomial, "
      "mean_trials: 12, eta: 0.5}\n"));
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_DOUBLE_EQ(r.spec.budget().max_epsilon(), 4.5);
  EXPECT_EQ(r.spec.privacy().selection(), "random_stopping");
  EXPECT_EQ(r.spec.privacy().distribution(), "truncated_negative_binomial");
  EXPECT_DOUBLE_EQ(r.spec.privacy().mean_trials(), 12);
  EXPECT_DOUBLE_EQ(r.spec.privacy().eta(), 0.5);
  LoadResult plain = Load(absl::StrCat(kDpStudy, "privacy: {selection: random_stopping}\n"));
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ(plain.spec.privacy().mean_trials(), 10);  // the defaults
  EXPECT_DOUBLE_EQ(plain.spec.privacy().eta(), 1);
}

TEST(StudyPrivacyLoaderTest, MaxEpsilonWithoutDpIsRefusedAtTheKey) {
  std::string no_dp(kDpStudy);
  no_dp.erase(no_dp.find("  dp: {"));
  EXPECT_THAT(Errors(absl::StrCat(no_dp, "budget: {max_epsilon: 3}\n")),
              ElementsAre(AllOf(StartsWith("exp.yaml:11:23: budget.max_epsilon:"),
                                HasSubstr("needs differential privacy: add federation.dp"))));
  EXPECT_THAT(Errors(R"(
name: plain
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
trial: {command: [echo, loss=1]}
budget: {max_epsilon: 3}
)"),
              ElementsAre(AllOf(StartsWith("exp.yaml:6:23: budget.max_epsilon:"),
                                HasSubstr("needs a federated search with differential privacy"))));
}

TEST(StudyPrivacyLoaderTest, APlainFederatedRunHasNoStudyToCap) {
  std::string run(kDpStudy);
  run.erase(run.find("parameters:"), run.find("trial:") - run.find("parameters:"));
  EXPECT_THAT(
      Errors(absl::StrCat(run, "budget: {max_epsilon: 3}\n")),
      Contains(AllOf(HasSubstr("budget.max_epsilon:"), HasSubstr("single federated run stops at "
                                                                 "federation.dp.target_epsilon"))));
}

TEST(StudyPrivacyLoaderTest, RandomStoppingWithAnAdaptiveSearchIsRefusedSayingWhy) {
  std::string adaptive(kDpStudy);
  adaptive.replace(adaptive.find("{sampler: random}"), 17,
                   "{sampler: bayesian, scheduler: asha, max_trials: 9, fidelity: {name: rounds, "
                   "min: 1, max: 4}}");
  const std::vector<std::string> errors =
      Errors(absl::StrCat(adaptive, "privacy: {selection: random_stopping}\n"));
  EXPECT_THAT(errors, Contains(AllOf(StartsWith("exp.yaml:5:19: search.sampler:"),
                                     HasSubstr("sampler bayesian adapts to the results"))));
  EXPECT_THAT(errors, Contains(AllOf(HasSubstr("search.scheduler:"),
                                     HasSubstr("a scheduler stops trials by them"))));
  EXPECT_THAT(errors, Contains(AllOf(HasSubstr("search.max_trials:"),
                                     HasSubstr("random_stopping draws the number of trials"))));
  EXPECT_EQ(errors.size(), 3u) << absl::StrJoin(errors, "\n");
}

TEST(StudyPrivacyLoaderTest, RandomStoppingWithoutDpIsRefused) {
  std::string no_dp(kDpStudy);
  no_dp.erase(no_dp.find("  dp: {"));
  EXPECT_THAT(Errors(absl::StrCat(no_dp, "privacy: {selection: random_stopping}\n")),
              ElementsAre(AllOf(StartsWith("exp.yaml:11:1: privacy:"),
                                HasSubstr("needs differential privacy"))));
}

TEST(StudyPrivacyLoaderTest, StoppingKeysAreCheckedAndApplyOnlyWhereTheyMean) {
  EXPECT_THAT(Errors(absl::StrCat(kDpStudy, "privacy: {mean_trials: 5}\n")),
              ElementsAre(HasSubstr("privacy.mean_trials: only with selection: random_stopping")));
  EXPECT_THAT(
      Errors(absl::StrCat(
          kDpStudy, "privacy: {selection: random_stopping, distribution: poisson, eta: 1}\n")),
      ElementsAre(HasSubstr("privacy.eta: only with distribution: truncated_negative_binomial")));
  EXPECT_THAT(
      Errors(absl::StrCat(kDpStudy, "privacy: {selection: random_stopping, mean_trials: 1}\n")),
      ElementsAre(HasSubstr("the expected number of trials must be above 1")));
  EXPECT_THAT(Errors(absl::StrCat(kDpStudy, "privacy: {selection: random_stopping, eta: -1}\n")),
              ElementsAre(HasSubstr("the shape must be above -1")));
}

TEST(StudyPrivacyLoaderTest, AFederatedSearchTunesOnlyFederationHyperparameters) {
  std::string typo(kDpStudy);
  typo.replace(typo.find("local_lr:"), 9, "learning_rate:");
  EXPECT_THAT(Errors(typo),
              ElementsAre(AllOf(StartsWith("exp.yaml:4:3: parameters.learning_rate:"),
                                HasSubstr("not one of its hyperparameters (local_lr, client_lr"))));
  std::string clip(kDpStudy);
  clip.replace(clip.find("local_lr:"), 9, "clip_norm:");
  EXPECT_TRUE(Load(clip).ok());
  clip.erase(clip.find("  dp: {"));
  EXPECT_THAT(Errors(clip), ElementsAre(HasSubstr("parameters.clip_norm: clip_norm tunes "
                                                  "federation.dp.clip_norm: add federation.dp")));
}

TEST(StudyPrivacyLoaderTest, RoundsAsFidelityNeedFederationAndARungWithinTheRounds) {
  EXPECT_THAT(Errors(R"(
name: not-federated
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {scheduler: asha, fidelity: {name: rounds, min: 1, max: 9}}
trial: {command: [echo, loss=1]}
)"),
              ElementsAre(AllOf(StartsWith("exp.yaml:5:44: search.fidelity.name:"),
                                HasSubstr("needs a federation: block"))));
  std::string above(kDpStudy);
  above.replace(above.find("{sampler: random}"), 17,
                "{sampler: random, scheduler: asha, fidelity: {name: rounds, min: 1, max: 9}}");
  EXPECT_THAT(Errors(above),
              ElementsAre(AllOf(HasSubstr("search.fidelity.max:"),
                                HasSubstr("a rung of 9 rounds is above federation.rounds (4)"))));
}

// federation.reproducible: on by default in a search by rounds (trials pause and resume), off
// elsewhere, and refused for buffered rounds that do not take every client's update per step.
TEST(StudyPrivacyLoaderTest, ReproducibleRoundsDefaultOnInASearchByRoundsAndNeedLockstepBuffers) {
  const std::string plain = R"(
name: t
objective: {metric: loss}
trial: {builtin: {model: mlp}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
)";
  LoadResult r = Load(plain);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_FALSE(r.spec.federation().reproducible());
  r = Load(plain + "  reproducible: true\n");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().reproducible());
  std::string by_rounds(kDpStudy);
  by_rounds.replace(by_rounds.find("{sampler: random}"), 17,
                    "{sampler: random, scheduler: asha, fidelity: {name: rounds, min: 1, max: 4}}");
  r = Load(by_rounds);
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().reproducible());
  r = Load(by_rounds + "  reproducible: false\n");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_FALSE(r.spec.federation().reproducible());
  // Buffered: reproducible only in lockstep.
  const std::string buffered = plain + "  secure_aggregation: false\n  mode: buffered\n";
  r = Load(buffered + "  buffer_size: 4\n  reproducible: true\n");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  EXPECT_TRUE(r.spec.federation().reproducible());
  EXPECT_THAT(Errors(buffered + "  buffer_size: 3\n  reproducible: true\n"),
              ElementsAre(AllOf(StartsWith("exp.yaml:9:17: federation.reproducible:"),
                                HasSubstr("every client's update (buffer_size: 4); with "
                                          "buffer_size 3 which updates a step takes depends "
                                          "on timing"))));
}

}  // namespace
}  // namespace sextant
