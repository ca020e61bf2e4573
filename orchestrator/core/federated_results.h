#ifndef SEXTANT_ORCHESTRATOR_CORE_FEDERATED_RESULTS_H_
#define SEXTANT_ORCHESTRATOR_CORE_FEDERATED_RESULTS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// A federated experiment described for people, and its rounds in the results document.

// True for a federated run: a federation block and no parameters to search (with parameters,
// each trial of the search is a federated run).
bool IsFederatedRun(const v1::ExperimentSpec& spec);

// What an experiment file asks for, in one line, as `sextant validate` prints it:
//   a search:             "3 parameters, 100 trials"
//   a federated run:      "federated: 2 regions x 4 clients, 20 rounds, secure aggregation, FedAvg"
//   a federated search:   "search over federated runs: 2 parameters, 8 trials; each run federated:
//                          2 regions x 4 clients, ..."
std::string DescribeExperiment(const v1::ExperimentSpec& spec);

// The federation block alone, from "federated: " on (regions x clients, rounds or buffered
// steps, secure aggregation or plaintext, robust rule, server optimiser, DP, model).
std::string DescribeFederation(const v1::ExperimentSpec& spec);

// What the figures of a round measure, in words for people (results and report print them
// beside the numbers).
struct RoundMetricMeanings {
  // The global row: the model after the round's server step scored on the orchestrator's
  // validation set or by evaluate_command, or (a model of the user's own without
  // evaluate_command) the clients' scores of the model they received.
  std::string global;
  // A region's row: its clients' scores of the model they received at the start of the round,
  // on their own held-out data, before training (round 1: the initial, untrained model).
  std::string regions;
  std::string cost;     // how dollars are attributed to a round
  std::string epsilon;  // whose privacy loss epsilon is
};
RoundMetricMeanings RoundMetricMeaning(const v1::ExperimentSpec& spec);

// Adds to a results document, for a federated run:
//   "federation": {"description", "mode", "regions": [{"name", "clients"}], "rounds_planned",
//                  "rounds_completed", "metrics": {"global", "regions", "cost", "epsilon"}}
//   "rounds": [{"round", "time", "accuracy", "loss", "clients", "rejected", "epsilon", "cost",
//               "regions": {"NAME": {"accuracy", "loss", "clients", "rejected", "epsilon",
//                                    "cost"}}}]
// in round order. time is seconds since the run started when the round closed. cost is the
// dollars billed between the previous round's close and this one's (null while nothing is
// billed; a region's: its instances' share, null when none of its instances is billed);
// epsilon is the run's cumulative privacy loss on the global row (null without DP, and always
// null on a region's). costs are the store's cost rows (trial rows are ignored).
void AddFederatedRounds(const v1::ExperimentSpec& spec, const std::vector<RoundRow>& rows,
                        const std::vector<CostRow>& costs, nlohmann::json* results);

// The rounds of a results document with "rounds" as CSV: a header, then one row per round and
// scope (the global model first, then each region): round,scope,region,accuracy,loss,clients,
// rejected,epsilon,cost,time, with scope "global" or "region" and numbers that read back
// exactly. Empty fields for nulls.
std::string FederatedRoundsToCsv(const nlohmann::json& results);

// A federated search with federation.dp: the privacy the whole study spent on the same
// clients, RDP composed over every round of every trial (`trials`: results' trial rows, each
// with its run's "privacy": noise_multiplier, sampling_rate, rounds, epsilon).
// {"study_epsilon", "delta", "method": "rdp_composition", "rounds", "per_trial": [{"trial",
// "epsilon", "rounds", "study_epsilon": the study's after this trial, in results' order}]}.
// Composition is always valid, and loose: N trials of the same configuration spend what one run of
// all their rounds would. Under privacy.selection: random_stopping, "study_epsilon" is the
// selection's (Papernot and Steinke) and "method" says so, with "composition_epsilon" beside it,
// "distribution", "mean_trials" (and "eta", "gamma"), "trials_drawn" and "released".
nlohmann::json StudyPrivacy(const v1::ExperimentSpec& spec, const nlohmann::json& trials);

// The rounds of a results document with "rounds" for people: a line per round for the global
// model and one per region beneath it, then what each figure measures. max_rows > 0 keeps only
// the newest max_rows rounds.
std::string FederatedRoundsToTable(const nlohmann::json& results, int max_rows);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_FEDERATED_RESULTS_H_
