#include "orchestrator/core/trial_command.h"

#include <cctype>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace sextant {

absl::StatusOr<std::string> SubstituteParams(const std::string& text, const Params& params,
                                             const SearchSpace& space) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t start = text.find("${", pos);
    if (start == std::string::npos) break;
    size_t end = text.find('}', start + 2);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("unterminated ${ in '", text, "'"));
    }
    out.append(text, pos, start - pos);
    std::string name = text.substr(start + 2, end - start - 2);
    auto it = params.find(name);
    if (it != params.end()) {
      out += FormatParamValue(it->second);
    } else if (space.IndexOf(name) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("${", name, "} names no parameter"));
    }
    pos = end + 1;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

std::string ParamsToJson(const Params& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : params) {
    if (const double* d = std::get_if<double>(&value)) {
      j[name] = *d;
    } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
      j[name] = *i;
    } else {
      j[name] = std::get<std::string>(value);
    }
  }
  return j.dump();
}

absl::StatusOr<Params> ParamsFromJson(const std::string& json, const SearchSpace& space) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("params: not a JSON object");
  Params out;
  for (const ParamSpec& spec : space.params) {
    auto it = j.find(spec.name);
    if (it == j.end()) continue;
    if (spec.kind == ParamSpec::Kind::kFloat && it->is_number()) {
      out[spec.name] = it->get<double>();
    } else if (spec.kind == ParamSpec::Kind::kInt && it->is_number()) {
      out[spec.name] = it->get<int64_t>();
    } else if (spec.kind == ParamSpec::Kind::kCategorical && it->is_string()) {
      out[spec.name] = it->get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("params: ", spec.name, " has the wrong type"));
    }
  }
  return out;
}

namespace {

v1::ParamValue ToProto(const ParamValue& value) {
  v1::ParamValue p;
  if (const double* d = std::get_if<double>(&value)) {
    p.set_number(*d);
  } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
    p.set_integer(*i);
  } else {
    p.set_category(std::get<std::string>(value));
  }
  return p;
}

std::string EnvName(const std::string& param) {
  std::string out = "SEXTANT_PARAM_";
  for (char c : param)
    out += std::isalnum(static_cast<unsigned char>(c)) ? absl::ascii_toupper(c) : '_';
  return out;
}

// The built-in trainer's flag for a hyperparameter name ("batch_size" -> "--batch-size").
std::string TrainerFlag(const std::string& name) {
  std::string flag = absl::StrCat("--", name);
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

// argv for `sextant-worker train`: the builtin block, then each search parameter named like a
// trainer option (unless args sets it), then args with ${name} substituted. The worker replaces
// argv[0] by its own path.
absl::StatusOr<std::vector<std::string>> BuiltinArgv(const v1::ExperimentSpec& spec,
                                                     const SearchSpace& space,
                                                     const Params& params) {
  const v1::BuiltinTrainer& b = spec.trial().builtin();
  std::vector<std::string> argv = {
      "sextant-worker", "train",
      "--model",        b.model().empty() ? "mlp" : b.model(),
      "--dataset",      b.dataset().empty() ? "fashion-mnist" : b.dataset()};
  if (b.epochs() > 0) argv.insert(argv.end(), {"--epochs", absl::StrCat(b.epochs())});
  if (b.gpus() > 0) argv.insert(argv.end(), {"--gpus", absl::StrCat(b.gpus())});
  if (!spec.search().fidelity().name().empty()) {
    argv.insert(argv.end(), {"--fidelity-name", spec.search().fidelity().name()});
  }
  for (const auto& [name, value] : params) {
    if (kBuiltinTrainerOptions.contains(name) && !b.args().contains(name)) {
      argv.insert(argv.end(), {TrainerFlag(name), FormatParamValue(value)});
    }
  }
  std::map<std::string, std::string> sorted(b.args().begin(), b.args().end());
  for (const auto& [name, value] : sorted) {
    SEXTANT_ASSIGN_OR_RETURN(std::string v, SubstituteParams(value, params, space));
    argv.insert(argv.end(), {TrainerFlag(name), std::move(v)});
  }
  return argv;
}

}  // namespace

absl::StatusOr<v1::Assignment> BuildAssignment(const v1::ExperimentSpec& spec,
                                               const SearchSpace& space, const Params& params,
                                               const AssignmentContext& context) {
  v1::Assignment a;
  a.set_trial_id(context.trial_id);
  a.set_attempt(context.attempt);
  a.set_timeout_seconds(spec.trial().timeout_seconds());
  a.set_checkpoint_dir(context.checkpoint_dir);
  for (const auto& [name, value] : params) (*a.mutable_params())[name] = ToProto(value);
  if (spec.has_federation()) {
    // Federated tuning: the trial is a whole federated run (`sextant run` of the same file in
    // the trial's folder), its parameters substituted into the federation block there.
    std::error_code ec;
    std::string file = std::filesystem::absolute(spec.source_path(), ec).string();
    if (ec) file = spec.source_path();
    for (std::string s : {std::string("sextant"), std::string("run"), file,
                          std::string("--run-dir"), context.checkpoint_dir + "/federation"}) {
      a.add_argv(std::move(s));
    }
    // With --tls-dir the inner run's participants get certificates of their own from the same
    // CA; with the Slurm partitions they are jobs where the run's own would be.
    for (const std::string& flag : context.federated_flags) a.add_argv(flag);
  } else if (spec.trial().has_builtin()) {
    SEXTANT_ASSIGN_OR_RETURN(std::vector<std::string> argv, BuiltinArgv(spec, space, params));
    for (std::string& s : argv) a.add_argv(std::move(s));
  }
  for (const std::string& arg : spec.trial().command()) {
    SEXTANT_ASSIGN_OR_RETURN(std::string s, SubstituteParams(arg, params, space));
    a.add_argv(std::move(s));
  }
  auto& env = *a.mutable_env();
  for (const auto& [key, value] : spec.trial().env()) {
    SEXTANT_ASSIGN_OR_RETURN(env[key], SubstituteParams(value, params, space));
  }
  env["SEXTANT_PARAMS"] = ParamsToJson(params);
  if (spec.has_federation()) env["SEXTANT_FEDERATED_TRIAL"] = absl::StrCat(1);
  for (const auto& [name, value] : params) env[EnvName(name)] = FormatParamValue(value);
  env["SEXTANT_TRIAL_ID"] = absl::StrCat(context.trial_id);
  env["SEXTANT_ATTEMPT"] = absl::StrCat(context.attempt);
  env["SEXTANT_EXPERIMENT"] = spec.name();
  env["SEXTANT_CHECKPOINT_DIR"] = context.checkpoint_dir;
  return a;
}

}  // namespace sextant
