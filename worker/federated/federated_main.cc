#include "worker/federated/federated_main.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "aggregator/federation_calls.h"
#include "aggregator/federation_service.h"
#include "aggregator/regional_aggregator.h"
#include "common/read_file.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "federation/secure_quantizer.h"
#include "grpcpp/grpcpp.h"
#include "rpc/channel_credentials.h"
#include "rpc/key_signer.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "worker/federated/evaluator.h"
#include "worker/federated/federated_client.h"
#include "worker/federated/federated_job.h"

namespace sextant {
namespace {

// The federated roles' flags and what each is for (`sextant-worker --role aggregator --help`).
struct FlagHelp {
  const char* name;
  const char* help;
};
constexpr FlagHelp kFlags[] = {
    {"--role", "client, aggregator or evaluator (required)"},
    {"--region", "the region served or joined (required but for an evaluator)"},
    {"--connect",
     "HOST:PORT upstream: the orchestrator, or a client's aggregator (required "
     "but for an evaluator)"},
    {"--experiment-id", "the federation's id (required but for an evaluator)"},
    {"--index", "client: its index in its region"},
    {"--name", "client: the NAME of its id REGION/NAME (default: its index)"},
    {"--spec", "client, evaluator: the experiment (a serialized ExperimentSpec)"},
    {"--threads", "client, evaluator: training threads"},
    {"--model-size", "aggregator: the model's floats (required)"},
    {"--data-dir", "client, with data: own: its data folder, the command's SEXTANT_DATA_DIR"},
    {"--work-dir",
     "aggregator, evaluator (required); client: the command client's exchange "
     "folder"},
    {"--listen", "aggregator: the address to serve clients on (default loopback, any port)"},
    {"--pool",
     "with --join: the run's pool this host's instance belongs to, where the run bills it "
     "(default: not billed)"},
    {"--port-file", "aggregator: where to write the port it listens on"},
    {"--chunk-floats", "floats per streamed chunk"},
    {"--aggregation", "aggregator: fedavg, median, trimmed_mean, krum or multi_krum"},
    {"--trim-fraction", "aggregator: trimmed_mean's fraction cut from each end (default 0.1)"},
    {"--byzantine", "aggregator: krum's tolerated faulty clients (default 1)"},
    {"--krum-selected", "aggregator: multi_krum's selected updates"},
    {"--tls-dir", "certificates from `sextant certs init`: TLS upstream and to clients"},
    {"--tls-name", "the certificate and token to present (default: the role's)"},
    {"--server-identity",
     "client: admit the aggregator by this sextant:// identity of its certificate instead of "
     "the name dialled (the aggregators `sextant run` starts name no host)"},
    {"--secure-aggregation", "aggregator: 1 for secure aggregation"},
    {"--secagg-clip", "aggregator: secure aggregation's clipping bound"},
    {"--secagg-bits", "aggregator: secure aggregation's quantisation bits"},
    {"--secagg-max-weight", "aggregator: the largest client weight secure aggregation encodes"},
    {"--secagg-stage-timeout", "aggregator: seconds each secure aggregation stage waits"},
    {"--hide-region-sum", "aggregator: 1 to pass only a masked regional sum upstream"},
    {"--secagg-ring-clients",
     "aggregator: with --hide-region-sum, the clients whose sum the ring must hold (every "
     "client of the run)"},
    {"--clients", "aggregator: the region's clients, <region>/0..N-1"},
    {"--startup-wait", "aggregator: seconds to wait for them before round 1 (default 120)"},
    {"--max-client-weight", "aggregator: the largest weight a client may claim"},
    {"--dp-clip-norm",
     "aggregator: central DP; each plaintext client update is clipped to this L2 norm and "
     "weighs 1"},
    {"--max-staleness",
     "aggregator: buffered asynchronous rounds (federation.mode: buffered), rejecting updates "
     "staler than this many model versions"},
    {"--staleness-weighting", "aggregator, buffered: polynomial (default) or constant"},
    {"--reproducible",
     "aggregator: 1 to fold each round's updates in the clients' order at its close, so that "
     "the same seed gives the same model bit for bit (federation.reproducible)"},
    {"--secret-file", "without TLS: the run's secret (RUN_DIR/secrets/worker.secret)"},
};

// The flags, parsed with CLI11 into `flags` (name -> value, the last one when a flag is
// repeated; absent when not given). Returns -1 to go on, or an exit code: 0 after --help, 2
// (with a message) on an unknown flag or one without its value.
int ParseFlags(int argc, char** argv, std::map<std::string, std::string>* flags) {
  CLI::App app(
      "sextant-worker, federated roles: a client trains on its partition, a regional "
      "aggregator folds its region's updates, an evaluator scores the global model.",
      "sextant-worker");
  app.failure_message(CLI::FailureMessage::simple);
  std::map<std::string, std::string> values;  // stable addresses for CLI11 to fill
  std::map<std::string, CLI::Option*> options;
  for (const FlagHelp& f : kFlags) {
    options[f.name] = app.add_option(f.name, values[f.name], f.help)
                          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  bool exit_with_parent = false;  // acted on by main before the role starts
  app.add_flag("--exit-with-parent", exit_with_parent, "exit when the launching process dies");
  bool join = false;
  app.add_flag("--join", join,
               "aggregator, client started by hand: ask --connect (the orchestrator, or the "
               "region's aggregator) for the experiment's settings, by the --tls-dir certificate");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "sextant-worker: " << e.what()
              << "\nRun 'sextant-worker --role aggregator --help' for usage.\n";
    return 2;
  }
  for (const auto& [name, option] : options) {
    if (option->count() > 0) (*flags)[name] = values[name];
  }
  if (join) (*flags)["--join"] = "1";
  return -1;
}

// --tls-name, or the role's own certificate and token.
std::string TlsName(std::map<std::string, std::string>& f, const std::string& role) {
  return f["--tls-name"].empty() ? role : f["--tls-name"];
}

// The flags a join plan may set for each role: the experiment's own, never where a participant
// stores, listens, dials or what it presents.
constexpr const char* kAggregatorPlanFlags[] = {"--region",
                                                "--experiment-id",
                                                "--model-size",
                                                "--clients",
                                                "--aggregation",
                                                "--trim-fraction",
                                                "--byzantine",
                                                "--krum-selected",
                                                "--secure-aggregation",
                                                "--secagg-clip",
                                                "--secagg-bits",
                                                "--secagg-max-weight",
                                                "--secagg-stage-timeout",
                                                "--hide-region-sum",
                                                "--secagg-ring-clients",
                                                "--max-client-weight",
                                                "--dp-clip-norm",
                                                "--max-staleness",
                                                "--staleness-weighting",
                                                "--reproducible"};
constexpr const char* kClientPlanFlags[] = {"--region", "--index", "--name", "--experiment-id"};

// A participant started by hand (--join): asks --connect for its plan with its --tls-dir
// certificate and takes the plan's flags into f. A flag given here too must agree. Returns an
// exit code (-1 to go on); *plan receives the plan.
int JoinByHand(std::map<std::string, std::string>& f, Clock* clock, v1::JoinPlan* plan) {
  const bool aggregator = f["--role"] == "aggregator";
  if (f["--connect"].empty() || f["--tls-dir"].empty()) {
    std::cerr << "sextant-worker: --join needs --connect HOST:PORT and --tls-dir DIR (a "
                 "participant started by hand is known by its certificate)\n";
    return 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      LoadChannelCredentials(f["--tls-dir"], TlsName(f, aggregator ? "aggregator" : "worker"));
  if (!creds.ok()) {
    std::cerr << "sextant-worker: --tls-dir: " << creds.status().message() << "\n";
    return 2;
  }
  std::cout << "joining " << f["--connect"] << "\n" << std::flush;
  // Upstream may not be up yet: ask again every second for up to 5 minutes, saying why every
  // 10 s (a TLS or name mistake shows here, not as a silent wait). Each try dials afresh, so
  // that a channel's reconnect backoff (up to minutes) does not hold up a server just started.
  auto join = [&] {
    auto stub = v1::FederationService::NewStub(grpc::CreateChannel(f["--connect"], *creds));
    return JoinUpstream(stub.get(), f["--experiment-id"], 30, f["--pool"]);
  };
  absl::Time said = absl::InfinitePast();
  absl::StatusOr<v1::JoinPlan> joined = RetryWhileUnreachable<v1::JoinPlan>(
      clock, RetryPolicy{absl::Minutes(5), absl::Seconds(1)}, join,
      [&](const absl::Status& why) {
        if (clock->Now() - said >= absl::Seconds(10)) {
          std::cout << "upstream " << f["--connect"] << " not reached yet: " << why << "\n"
                    << std::flush;
          said = clock->Now();
        }
        return absl::OkStatus();
      });
  if (!joined.ok()) {
    std::cerr << "sextant-worker: joining " << f["--connect"] << ": " << joined.status() << "\n";
    return 1;
  }
  const absl::Span<const char* const> allowed = aggregator
                                                    ? absl::MakeConstSpan(kAggregatorPlanFlags)
                                                    : absl::MakeConstSpan(kClientPlanFlags);
  for (int i = 0; i + 1 < joined->flags_size(); i += 2) {
    const std::string& name = joined->flags(i);
    const std::string& value = joined->flags(i + 1);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::cerr << "sextant-worker: the plan from " << f["--connect"] << " sets " << name
                << ", which only this host may set\n";
      return 1;
    }
    if (auto given = f.find(name);
        given != f.end() && !given->second.empty() && given->second != value) {
      std::cerr << "sextant-worker: " << name << " " << f[name] << " given here, but "
                << f["--connect"] << " says " << value << "\n";
      return 2;
    }
    f[name] = value;
  }
  *plan = *std::move(joined);
  return -1;
}

// With --tls-dir an aggregator dials upstream and serves its clients as the orchestrator does:
// TLS, mTLS against the CA and enrolled.txt, identities or per-role bearer tokens; without it,
// it may listen on loopback only, and with --secret-file both its server and its upstream
// channel need the run's secret. Returns an exit code.
int AggregatorSecurity(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  ServerSecurity security;
  if (f["--tls-dir"].empty() && !f["--secret-file"].empty()) {
    absl::StatusOr<std::string> secret = ReadSecretFile(f["--secret-file"]);
    if (!secret.ok()) {
      std::cerr << "sextant-worker: --secret-file: " << secret.status().message() << "\n";
      return 2;
    }
    security = LoopbackSecurity(*secret);
    o->upstream_credentials = LoopbackChannelCredentials(*secret);
    o->server_credentials = MakeServerCredentials(security);
  } else if (!f["--tls-dir"].empty()) {
    auto loaded = LoadServerSecurity(f["--tls-dir"], TlsName(f, "aggregator"));
    auto creds = LoadChannelCredentials(f["--tls-dir"], TlsName(f, "aggregator"));
    if (!loaded.ok() || !creds.ok()) {
      std::cerr << "sextant-worker: --tls-dir: "
                << (loaded.ok() ? creds.status() : loaded.status()).message() << "\n";
      return 2;
    }
    security = *std::move(loaded);
    o->upstream_credentials = *creds;
    o->server_credentials = MakeServerCredentials(security);
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f["--tls-dir"], TlsName(f, "aggregator"));
    if (!signer.ok()) {
      std::cerr << "sextant-worker: --tls-dir: " << signer.status().message() << "\n";
      return 2;
    }
    o->signer = *std::move(signer);
  }
  if (absl::Status s = CheckListenAllowed(o->listen, security); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  if (absl::Status s = CheckDialAllowed(f["--connect"], !f["--tls-dir"].empty()); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  return 0;
}

// The experiment in --spec (a serialized ExperimentSpec); false, with a message, when it
// cannot be read.
bool ReadSpec(std::map<std::string, std::string>& f, v1::ExperimentSpec* spec) {
  std::ifstream in(f["--spec"], std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in || !spec->ParseFromString(buf.str())) {
    std::cerr << "sextant-worker: cannot read the experiment from " << f["--spec"] << "\n";
    return false;
  }
  return true;
}

// A client started by hand: the experiment of its plan, run only when the orchestrator signed
// it, for the run id this client was given (main checks it was: another run's plan, signed for
// another id, fails here; an old one of this id fails its expiry). Returns an exit code (-1 to
// go on).
int SpecFromPlan(std::map<std::string, std::string>& f, const v1::JoinPlan& plan, Clock* clock,
                 v1::ExperimentSpec* spec) {
  std::optional<std::string> ca = ReadFileIfPresent(f["--tls-dir"] + "/ca.pem");
  const absl::Status signed_by = VerifyOrchestratorSignature(
      ca.value_or(""), {plan.spec_certificate(), plan.spec_signature()},
      ExperimentBinding(f["--experiment-id"], plan.spec(), plan.expires_at()));
  if (!signed_by.ok()) {
    std::cerr << "sextant-worker: the plan from " << f["--connect"] << ": " << signed_by << "\n";
    return 1;
  }
  if (clock->Now() > absl::FromUnixSeconds(plan.expires_at()) + absl::Minutes(5)) {
    std::cerr << "sextant-worker: the plan from " << f["--connect"] << " expired at "
              << absl::FormatTime(absl::FromUnixSeconds(plan.expires_at()))
              << "; the run's orchestrator signs a fresh one each session\n";
    return 1;
  }
  if (!spec->ParseFromString(plan.spec())) {
    std::cerr << "sextant-worker: the experiment from " << f["--connect"] << " does not parse\n";
    return 1;
  }
  return -1;
}

int RunClient(std::map<std::string, std::string>& f, const v1::JoinPlan* plan, Clock* clock,
              const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (plan != nullptr) {
    if (int rc = SpecFromPlan(f, *plan, clock, &spec); rc >= 0) return rc;
  } else if (!ReadSpec(f, &spec)) {
    return 2;
  }
  FederatedClientOptions o;
  o.target = f["--connect"];
  o.experiment_id = f["--experiment-id"];
  o.region = f["--region"];
  o.name = f["--name"];
  if (!absl::SimpleAtoi(f["--index"], &o.index)) {
    std::cerr << "sextant-worker: --index takes an integer\n";
    return 2;
  }
  if (f.count("--threads")) (void)absl::SimpleAtoi(f["--threads"], &o.threads);
  if (f.count("--chunk-floats")) (void)absl::SimpleAtoi(f["--chunk-floats"], &o.chunk_floats);
  absl::StatusOr<int> global = GlobalClientIndex(spec.federation(), o.region, o.index);
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!global.ok() || !job.ok()) {
    std::cerr << "sextant-worker: " << (global.ok() ? job.status() : global.status()) << "\n";
    return 2;
  }
  o.global_index = *global;
  o.job = *job;
  o.log = &std::cout;
  if (f.count("--work-dir")) o.work_dir = f["--work-dir"];
  if (f.count("--data-dir")) {
    // The command runs from the experiment's folder: a relative folder is this process's.
    std::error_code ec;
    o.data_dir = std::filesystem::absolute(f["--data-dir"], ec).lexically_normal().string();
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds;
  if (f["--server-identity"].empty()) {
    creds = LoadChannelCredentials(f["--tls-dir"], TlsName(f, "worker"), f["--secret-file"]);
  } else if (absl::StatusOr<PeerIdentity> server = ParseIdentityUri(f["--server-identity"]);
             server.ok()) {
    creds = LoadChannelCredentialsForServer(f["--tls-dir"], TlsName(f, "worker"), *server);
  } else {
    creds = server.status();
  }
  if (!creds.ok()) {
    std::cerr << "sextant-worker: " << (f["--tls-dir"].empty() ? "--secret-file" : "--tls-dir")
              << ": " << creds.status().message() << "\n";
    return 2;
  }
  if (absl::Status s = CheckDialAllowed(o.target, !f["--tls-dir"].empty()); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  o.stub = v1::FederationService::NewStub(grpc::CreateChannel(o.target, *creds));
  if (!f["--tls-dir"].empty()) {
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f["--tls-dir"], TlsName(f, "worker"));
    if (!signer.ok()) {
      std::cerr << "sextant-worker: --tls-dir: " << signer.status().message() << "\n";
      return 2;
    }
    o.signer = *std::move(signer);
  }
  // With data: own Sextant partitions nothing: the command reads the site's data.
  absl::StatusOr<train::FashionMnist> data =
      o.job.own_data
          ? train::FashionMnist{}
          : train::LoadFashionMnist(o.job.dataset_dir, o.job.validation_examples, o.job.seed);
  if (!data.ok() && o.job.own_model) {
    // A model of the user's own needs no Fashion-MNIST: its command reads data of its own.
    std::cout << "client: no Fashion-MNIST share (" << data.status().message() << ")\n";
    data = train::FashionMnist{};
  }
  if (!data.ok()) {
    std::cerr << "sextant-worker: " << data.status() << "\n";
    return 1;
  }
  absl::StatusOr<FederatedClientStats> stats = RunFederatedClient(o, *data, clock, stop);
  if (!stats.ok()) {
    std::cerr << "sextant-worker: " << stats.status() << "\n";
    return 1;
  }
  std::cout << "client_done rounds=" << stats->rounds << " bytes_sent=" << stats->bytes_sent
            << " model_bytes=" << stats->model_floats * 4 << " examples=" << stats->examples
            << "\n";
  return 0;
}

// The global tier's evaluator: the experiment's model on its validation split.
int RunEvaluatorRole(std::map<std::string, std::string>& f, Clock* clock,
                     const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (!ReadSpec(f, &spec)) return 2;
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!job.ok()) {
    std::cerr << "sextant-worker: " << job.status() << "\n";
    return 2;
  }
  EvaluatorOptions o;
  o.job = *job;
  o.dir = f["--work-dir"];
  if (o.dir.empty()) {
    std::cerr << "sextant-worker: an evaluator needs --work-dir DIR\n";
    return 2;
  }
  if (f.count("--threads")) (void)absl::SimpleAtoi(f["--threads"], &o.threads);
  absl::Status s = RunEvaluator(o, clock, stop);
  if (!s.ok()) {
    std::cerr << "sextant-worker: evaluator: " << s << "\n";
    return 1;
  }
  return 0;
}

// --aggregation and its parameters (--trim-fraction, --byzantine, --krum-selected) into o.rule,
// and --reproducible into o.ordered.
absl::Status ParseAggregation(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  double trim = 0.1;
  int64_t byzantine = 1, selected = 0;
  if ((f.count("--trim-fraction") && !absl::SimpleAtod(f["--trim-fraction"], &trim)) ||
      (f.count("--byzantine") && !absl::SimpleAtoi(f["--byzantine"], &byzantine)) ||
      (f.count("--krum-selected") && !absl::SimpleAtoi(f["--krum-selected"], &selected))) {
    return absl::InvalidArgumentError(
        "--trim-fraction takes a number, --byzantine and --krum-selected integers");
  }
  SEXTANT_ASSIGN_OR_RETURN(o->rule,
                           MakeAggregationRule(f["--aggregation"], trim, byzantine, selected));
  o->ordered = f["--reproducible"] == "1" || f["--reproducible"] == "true";
  return absl::OkStatus();
}

// Secure aggregation (--secure-aggregation, --secagg-*, --hide-region-sum) and central DP's
// clip (--dp-clip-norm), which the aggregator applies only to plaintext updates.
absl::Status ParseSecurity(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  o->secure_aggregation = f["--secure-aggregation"] == "1" || f["--secure-aggregation"] == "true";
  if ((f.count("--secagg-clip") && !absl::SimpleAtod(f["--secagg-clip"], &o->quantization.clip)) ||
      (f.count("--secagg-bits") && !absl::SimpleAtoi(f["--secagg-bits"], &o->quantization.bits)) ||
      (f.count("--secagg-max-weight") &&
       !absl::SimpleAtoi(f["--secagg-max-weight"], &o->quantization.max_weight)) ||
      (f.count("--secagg-stage-timeout") &&
       !absl::SimpleAtod(f["--secagg-stage-timeout"], &o->stage_timeout_seconds))) {
    return absl::InvalidArgumentError(
        "--secagg-clip and --secagg-stage-timeout take numbers, --secagg-bits and "
        "--secagg-max-weight integers");
  }
  if (f.count("--dp-clip-norm") &&
      (!absl::SimpleAtod(f["--dp-clip-norm"], &o->dp_clip_norm) ||
       !(o->dp_clip_norm >= 0 && std::isfinite(o->dp_clip_norm)))) {
    return absl::InvalidArgumentError("--dp-clip-norm takes a number >= 0");
  }
  if (o->dp_clip_norm > 0 && o->secure_aggregation) {
    return absl::InvalidArgumentError(
        "--dp-clip-norm clips plaintext updates; under --secure-aggregation the clients clip "
        "their own");
  }
  o->hide_region_sum = f["--hide-region-sum"] == "1" || f["--hide-region-sum"] == "true";
  if (f.count("--secagg-ring-clients") &&
      !absl::SimpleAtoi(f["--secagg-ring-clients"], &o->ring_clients)) {
    return absl::InvalidArgumentError("--secagg-ring-clients takes an integer");
  }
  if (o->hide_region_sum && !o->secure_aggregation) {
    return absl::InvalidArgumentError("--hide-region-sum needs --secure-aggregation 1");
  }
  if (!o->secure_aggregation) return absl::OkStatus();
  SecureQuantizerOptions q{o->quantization.clip, o->quantization.bits, o->quantization.max_weight,
                           2, 0};
  return SecureQuantizer::Create(q).status();
}

// The region's clients (--clients, ids REGION/0..), how long to wait for them at start
// (--startup-wait) and the most weight one may declare (--max-client-weight).
absl::Status ParseClients(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  // The most clients one aggregator serves: as many as its sender gate keeps weights for.
  const int64_t max_clients = static_cast<int64_t>(TierPolicy{}.max_senders);
  int64_t clients = 0;
  if ((f.count("--clients") &&
       (!absl::SimpleAtoi(f["--clients"], &clients) || clients < 0 || clients > max_clients)) ||
      (f.count("--startup-wait") &&
       (!absl::SimpleAtod(f["--startup-wait"], &o->startup_wait_seconds) ||
        !(o->startup_wait_seconds >= 0)))) {
    return absl::InvalidArgumentError(absl::StrCat("--clients takes an integer from 0 to ",
                                                   max_clients, ", --startup-wait seconds >= 0"));
  }
  if (f.count("--max-client-weight") &&
      (!absl::SimpleAtod(f["--max-client-weight"], &o->max_client_weight) ||
       !(o->max_client_weight >= 0))) {
    return absl::InvalidArgumentError("--max-client-weight takes a number >= 0");
  }
  for (int64_t i = 0; i < clients; ++i) {
    o->clients.push_back(ClientId(o->region, static_cast<int>(i)));
  }
  return absl::OkStatus();
}

// Buffered rounds (--max-staleness, --staleness-weighting), after ParseAggregation and
// ParseSecurity: a weighted mean only, and no hidden region sums.
absl::Status ParseBuffered(std::map<std::string, std::string>& f, RegionalAggregatorOptions* o) {
  if (!f.count("--max-staleness")) return absl::OkStatus();
  o->buffer.enabled = true;
  const std::string& w = f["--staleness-weighting"];
  if (!absl::SimpleAtoi(f["--max-staleness"], &o->buffer.max_staleness) ||
      o->buffer.max_staleness < 0 || !(w.empty() || w == "polynomial" || w == "constant")) {
    return absl::InvalidArgumentError(
        "--max-staleness takes an integer >= 0, --staleness-weighting polynomial or constant");
  }
  if (w == "constant") o->buffer.weighting = BufferPolicy::Weighting::kConstant;
  if (o->rule.robust()) {
    return absl::InvalidArgumentError(
        "--max-staleness (buffered rounds) folds a weighted mean: not with a robust "
        "--aggregation");
  }
  if (o->hide_region_sum) {
    return absl::InvalidArgumentError(
        "--hide-region-sum takes synchronous rounds, not --max-staleness");
  }
  return absl::OkStatus();
}

int RunAggregator(std::map<std::string, std::string>& f, const v1::JoinPlan* plan, Clock* clock,
                  const std::atomic<bool>* stop, const ServerInterceptors& interceptors) {
  RegionalAggregatorOptions o;
  o.interceptors = interceptors;
  if (plan != nullptr) {  // its clients are started by hand too, and join here
    o.join_clients = true;
    o.client_spec = plan->spec();
    o.client_spec_signature = plan->spec_signature();
    o.client_spec_certificate = plan->spec_certificate();
    o.client_spec_expires_at = plan->expires_at();
  }
  o.upstream = f["--connect"];
  o.experiment_id = f["--experiment-id"];
  o.region = f["--region"];
  o.work_dir = f["--work-dir"];
  if (f.count("--listen")) o.listen = f["--listen"];
  o.port_file = f["--port-file"];
  if (!absl::SimpleAtoi(f["--model-size"], &o.model_size) || o.model_size <= 0 ||
      o.work_dir.empty()) {
    std::cerr << "sextant-worker: an aggregator needs --model-size N and --work-dir DIR\n";
    return 2;
  }
  if (f.count("--chunk-floats")) (void)absl::SimpleAtoi(f["--chunk-floats"], &o.chunk_floats);
  for (auto parse : {ParseAggregation, ParseSecurity, ParseClients, ParseBuffered}) {
    if (absl::Status s = parse(f, &o); !s.ok()) {
      std::cerr << "sextant-worker: " << s.message() << "\n";
      return 2;
    }
  }
  o.log = &std::cout;
  if (int rc = AggregatorSecurity(f, &o); rc != 0) return rc;
  absl::Status s = RunRegionalAggregator(o, clock, stop);
  if (!s.ok()) {
    std::cerr << "sextant-worker: " << s << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

bool IsFederatedInvocation(int argc, char** argv) {
  // Only the role and what a client runs are read here; every other flag is the role's own (or
  // the trial worker's) and passes through untouched.
  CLI::App app;
  app.allow_extras();
  app.set_help_flag();
  std::string role, spec;
  bool join = false;
  app.add_option("--role", role)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--spec", spec)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_flag("--join", join);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError&) {
    return false;  // the trial worker's parser says what is wrong
  }
  return role == "aggregator" || role == "evaluator" ||
         (role == "client" && (!spec.empty() || join));
}

int RunFederatedMain(int argc, char** argv, Clock* clock, const std::atomic<bool>* stop,
                     const ServerInterceptors& interceptors) {
  std::map<std::string, std::string> f;
  if (int rc = ParseFlags(argc, argv, &f); rc >= 0) return rc;
  const bool joined = f.count("--join") > 0;
  if (f["--role"] == "evaluator") {
    if (joined) {
      std::cerr << "sextant-worker: --join is for aggregators and clients started by hand; the "
                   "evaluator runs beside the orchestrator\n";
      return 2;
    }
    return RunEvaluatorRole(f, clock, stop);
  }
  if (!joined && f.count("--pool") > 0) {
    std::cerr << "sextant-worker: --pool applies to a participant started by hand (--join); the "
                 "run bills the participants it starts on their placement itself\n";
    return 2;
  }
  v1::JoinPlan plan;
  if (joined && f["--role"] == "client" && f["--experiment-id"].empty()) {
    // The aggregator that relays a client's plan is not trusted to say which run it is for.
    std::cerr << "sextant-worker: a client started by hand needs --experiment-id ID, the run's "
                 "id that `sextant run --external-participants` prints, so that no other run's "
                 "plan is taken for it\n";
    return 2;
  }
  if (joined) {
    if (int rc = JoinByHand(f, clock, &plan); rc >= 0) return rc;
  }
  for (const char* required : {"--region", "--connect", "--experiment-id"}) {
    if (f[required].empty()) {
      std::cerr << "sextant-worker: " << required << " is required for a federated role\n";
      return 2;
    }
  }
  const v1::JoinPlan* p = joined ? &plan : nullptr;
  return f["--role"] == "aggregator" ? RunAggregator(f, p, clock, stop, interceptors)
                                     : RunClient(f, p, clock, stop);
}

}  // namespace sextant
