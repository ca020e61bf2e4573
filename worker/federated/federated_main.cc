#include "worker/federated/federated_main.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "aggregator/federation_calls.h"
#include "aggregator/federation_service.h"
#include "aggregator/regional_aggregator.h"
#include "aggregator/tier_settings.h"
#include "common/read_file.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rpc/channel_credentials.h"
#include "rpc/host_address.h"
#include "rpc/key_signer.h"
#include "rpc/peer_channel.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "worker/federated/evaluator.h"
#include "worker/federated/federated_client.h"
#include "worker/federated/federated_job.h"

namespace sextant {
namespace {

// The federated roles' flags, parsed by CLI11 straight into their fields
// (`sextant-worker --role aggregator --help`). An aggregator's settings are not flags: it
// derives them from the experiment (ApplyExperiment, aggregator/tier_settings.h).
struct FederatedFlags {
  std::string role;           // client, aggregator or evaluator
  std::string region;         // the region served or joined
  std::string connect;        // HOST:PORT upstream
  std::string experiment_id;  // the federation's id
  int index = -1;             // client: its index in its region (-1: not given)
  std::string name;           // client: the NAME of its id REGION/NAME
  std::string spec;           // the experiment (a serialized ExperimentSpec)
  int threads = 0;            // training threads (0: the default)
  int64_t model_size = 0;     // aggregator: the model's floats (0: not given)
  std::string data_dir, work_dir, listen, pool, port_file, address_file;
  int64_t chunk_floats = 0;  // floats per streamed chunk (0: the default)
  std::string tls_dir, tls_name, server_identity, secret_file;
  double startup_wait = 120;  // aggregator: seconds to wait for its clients before round 1
  bool join = false;
  std::set<std::string> given;  // the flags given on the command line
};

// Parses the flags into *f. Returns -1 to go on, or an exit code: 0 after --help, 2 (with a
// message) on an unknown flag, one without its value, or a value of the wrong kind.
int ParseFlags(int argc, char** argv, FederatedFlags* f) {
  CLI::App app(
      "sextant-worker, federated roles: a client trains on its partition, a regional "
      "aggregator folds its region's updates, an evaluator scores the global model.",
      "sextant-worker");
  app.failure_message(CLI::FailureMessage::simple);
  auto last = [](CLI::Option* o) {
    return o->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  last(app.add_option("--role", f->role, "client, aggregator or evaluator (required)"));
  last(app.add_option("--region", f->region,
                      "the region served or joined (required but for an evaluator)"));
  last(app.add_option("--connect", f->connect,
                      "HOST:PORT upstream: the orchestrator, or a client's aggregator (required "
                      "but for an evaluator)"));
  last(app.add_option("--experiment-id", f->experiment_id,
                      "the federation's id (required but for an evaluator)"));
  last(app.add_option("--index", f->index, "client: its index in its region"));
  last(app.add_option("--name", f->name,
                      "client: the NAME of its id REGION/NAME (default: its index)"));
  last(app.add_option("--spec", f->spec,
                      "the experiment (a serialized ExperimentSpec); an aggregator takes its "
                      "settings from it (required but with --join)"));
  last(app.add_option("--threads", f->threads, "client, evaluator: training threads"));
  last(app.add_option("--model-size", f->model_size, "aggregator: the model's floats (required)"));
  last(app.add_option("--data-dir", f->data_dir,
                      "client, with data: own: its data folder, the command's SEXTANT_DATA_DIR"));
  last(app.add_option("--work-dir", f->work_dir,
                      "aggregator, evaluator (required); client: the command client's exchange "
                      "folder"));
  last(app.add_option("--listen", f->listen,
                      "aggregator: the address to serve clients on, HOST:PORT (default loopback, "
                      "any port); HOST auto: this host's address toward --connect"));
  last(app.add_option("--pool", f->pool,
                      "with --join: the run's pool this host's instance belongs to, where the run "
                      "bills it (default: not billed)"));
  last(app.add_option("--port-file", f->port_file,
                      "aggregator: where to write the port it listens on"));
  last(app.add_option("--address-file", f->address_file,
                      "aggregator: where to write the HOST:PORT its clients dial; client: that "
                      "file, read again while its aggregator is unreachable (a new instance may "
                      "serve elsewhere)"));
  last(app.add_option("--chunk-floats", f->chunk_floats, "floats per streamed chunk"));
  last(app.add_option("--tls-dir", f->tls_dir,
                      "certificates from `sextant certs init`: TLS upstream and to clients"));
  last(app.add_option("--tls-name", f->tls_name,
                      "the certificate and token to present (default: the role's)"));
  last(app.add_option("--server-identity", f->server_identity,
                      "client: admit the aggregator by this sextant:// identity of its "
                      "certificate instead of the name dialled (the aggregators `sextant run` "
                      "starts name no host)"));
  last(app.add_option("--startup-wait", f->startup_wait,
                      "aggregator: seconds to wait for its clients before round 1 (default 120)"))
      ->check(CLI::NonNegativeNumber);
  last(app.add_option("--secret-file", f->secret_file,
                      "without TLS: the run's secret (RUN_DIR/secrets/worker.secret)"));
  bool exit_with_parent = false;  // acted on by main before the role starts
  app.add_flag("--exit-with-parent", exit_with_parent, "exit when the launching process dies");
  app.add_flag("--join", f->join,
               "aggregator, client started by hand: ask --connect (the orchestrator, or the "
               "region's aggregator) for the experiment, by the --tls-dir certificate");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "sextant-worker: " << e.what()
              << "\nRun 'sextant-worker --role aggregator --help' for usage.\n";
    return 2;
  }
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() > 0) f->given.insert(o->get_name());
  }
  return -1;
}

// --tls-name, or the role's own certificate and token.
std::string TlsName(const FederatedFlags& f, const std::string& role) {
  return f.tls_name.empty() ? role : f.tls_name;
}

// The flags a join plan may set, for which roles, and where each goes: the run's facts, never
// where a participant stores, listens, dials or what it presents. (The experiment itself comes
// with the plan, signed.)
struct PlanFlag {
  const char* name;
  bool aggregator, client;                               // whose plans carry it
  bool (*set)(FederatedFlags& f, const std::string& v);  // false: not a value of its kind
  std::string (*get)(const FederatedFlags& f);
};
constexpr PlanFlag kPlanFlags[] = {
    {"--region", true, true,
     [](FederatedFlags& f, const std::string& v) { return !(f.region = v).empty(); },
     [](const FederatedFlags& f) { return f.region; }},
    {"--experiment-id", true, true,
     [](FederatedFlags& f, const std::string& v) { return !(f.experiment_id = v).empty(); },
     [](const FederatedFlags& f) { return f.experiment_id; }},
    {"--model-size", true, false,
     [](FederatedFlags& f, const std::string& v) { return absl::SimpleAtoi(v, &f.model_size); },
     [](const FederatedFlags& f) { return absl::StrCat(f.model_size); }},
    {"--index", false, true,
     [](FederatedFlags& f, const std::string& v) { return absl::SimpleAtoi(v, &f.index); },
     [](const FederatedFlags& f) { return absl::StrCat(f.index); }},
    {"--name", false, true,
     [](FederatedFlags& f, const std::string& v) { return !(f.name = v).empty(); },
     [](const FederatedFlags& f) { return f.name; }},
};

// A participant started by hand (--join): asks --connect for its plan with its --tls-dir
// certificate and takes the plan's flags into f. A flag given here too must agree. Returns an
// exit code (-1 to go on); *plan receives the plan.
int JoinByHand(FederatedFlags& f, Clock* clock, v1::JoinPlan* plan) {
  const bool aggregator = f.role == "aggregator";
  if (f.connect.empty() || f.tls_dir.empty()) {
    std::cerr << "sextant-worker: --join needs --connect HOST:PORT and --tls-dir DIR (a "
                 "participant started by hand is known by its certificate)\n";
    return 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      LoadChannelCredentials(f.tls_dir, TlsName(f, aggregator ? "aggregator" : "worker"));
  if (!creds.ok()) {
    std::cerr << "sextant-worker: --tls-dir: " << creds.status().message() << "\n";
    return 2;
  }
  std::cout << "joining " << f.connect << "\n" << std::flush;
  // Upstream may not be up yet: ask again every second for up to 5 minutes, saying why every
  // 10 s (a TLS or name mistake shows here, not as a silent wait). Each try dials afresh, so
  // that a channel's reconnect backoff (up to minutes) does not hold up a server just started.
  auto join = [&] {
    auto stub = v1::FederationService::NewStub(grpc::CreateChannel(f.connect, *creds));
    return JoinUpstream(stub.get(), f.experiment_id, 30, f.pool);
  };
  absl::Time said = absl::InfinitePast();
  absl::StatusOr<v1::JoinPlan> joined = RetryWhileUnreachable<v1::JoinPlan>(
      clock, RetryPolicy{absl::Minutes(5), absl::Seconds(1)}, join, [&](const absl::Status& why) {
        if (clock->Now() - said >= absl::Seconds(10)) {
          std::cout << "upstream " << f.connect << " not reached yet: " << why << "\n"
                    << std::flush;
          said = clock->Now();
        }
        return absl::OkStatus();
      });
  if (!joined.ok()) {
    std::cerr << "sextant-worker: joining " << f.connect << ": " << joined.status() << "\n";
    return 1;
  }
  for (int i = 0; i + 1 < joined->flags_size(); i += 2) {
    const std::string& name = joined->flags(i);
    const std::string& value = joined->flags(i + 1);
    const PlanFlag* flag = nullptr;
    for (const PlanFlag& p : kPlanFlags) {
      if (name == p.name && (aggregator ? p.aggregator : p.client)) flag = &p;
    }
    if (flag == nullptr) {
      std::cerr << "sextant-worker: the plan from " << f.connect << " sets " << name
                << ", which only this host may set\n";
      return 1;
    }
    if (f.given.count(name) && flag->get(f) != value) {
      std::cerr << "sextant-worker: " << name << " " << flag->get(f) << " given here, but "
                << f.connect << " says " << value << "\n";
      return 2;
    }
    if (!flag->set(f, value)) {
      std::cerr << "sextant-worker: the plan from " << f.connect << " sets " << name << " to "
                << value << ", which is not a value of it\n";
      return 1;
    }
  }
  *plan = *std::move(joined);
  return -1;
}

// With --tls-dir an aggregator dials upstream and serves its clients as the orchestrator does:
// TLS, mTLS against the CA and enrolled.txt, identities or per-role bearer tokens; without it,
// it may listen on loopback only, and with --secret-file both its server and its upstream
// channel need the run's secret. Returns an exit code.
int AggregatorSecurity(const FederatedFlags& f, RegionalAggregatorOptions* o) {
  ServerSecurity security;
  if (f.tls_dir.empty() && !f.secret_file.empty()) {
    absl::StatusOr<std::string> secret = ReadSecretFile(f.secret_file);
    if (!secret.ok()) {
      std::cerr << "sextant-worker: --secret-file: " << secret.status().message() << "\n";
      return 2;
    }
    security = LoopbackSecurity(*secret);
    o->upstream_credentials = LoopbackChannelCredentials(*secret);
    o->server_credentials = MakeServerCredentials(security);
  } else if (!f.tls_dir.empty()) {
    auto loaded = LoadServerSecurity(f.tls_dir, TlsName(f, "aggregator"));
    auto creds = LoadChannelCredentials(f.tls_dir, TlsName(f, "aggregator"));
    if (!loaded.ok() || !creds.ok()) {
      std::cerr << "sextant-worker: --tls-dir: "
                << (loaded.ok() ? creds.status() : loaded.status()).message() << "\n";
      return 2;
    }
    security = *std::move(loaded);
    o->upstream_credentials = *creds;
    o->server_credentials = MakeServerCredentials(security);
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f.tls_dir, TlsName(f, "aggregator"));
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
  if (absl::Status s = CheckDialAllowed(f.connect, !f.tls_dir.empty()); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  return 0;
}

// The experiment in --spec (a serialized ExperimentSpec); false, with a message, when it
// cannot be read.
bool ReadSpec(const FederatedFlags& f, v1::ExperimentSpec* spec) {
  std::ifstream in(f.spec, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in || !spec->ParseFromString(buf.str())) {
    std::cerr << "sextant-worker: cannot read the experiment from " << f.spec << "\n";
    return false;
  }
  return true;
}

// A client started by hand: the experiment of its plan, run only when the orchestrator signed
// it, for the run id this client was given (main checks it was: another run's plan, signed for
// another id, fails here; an old one of this id fails its expiry). Returns an exit code (-1 to
// go on).
int SpecFromPlan(const FederatedFlags& f, const v1::JoinPlan& plan, Clock* clock,
                 v1::ExperimentSpec* spec) {
  std::optional<std::string> ca = ReadFileIfPresent(f.tls_dir + "/ca.pem");
  const absl::Status signed_by = VerifyOrchestratorSignature(
      ca.value_or(""), {plan.spec_certificate(), plan.spec_signature()},
      ExperimentBinding(f.experiment_id, plan.spec(), plan.expires_at()));
  if (!signed_by.ok()) {
    std::cerr << "sextant-worker: the plan from " << f.connect << ": " << signed_by << "\n";
    return 1;
  }
  if (clock->Now() > absl::FromUnixSeconds(plan.expires_at()) + absl::Minutes(5)) {
    std::cerr << "sextant-worker: the plan from " << f.connect << " expired at "
              << absl::FormatTime(absl::FromUnixSeconds(plan.expires_at()))
              << "; the run's orchestrator signs a fresh one each session\n";
    return 1;
  }
  if (!spec->ParseFromString(plan.spec())) {
    std::cerr << "sextant-worker: the experiment from " << f.connect << " does not parse\n";
    return 1;
  }
  return -1;
}

int RunClient(FederatedFlags& f, const v1::JoinPlan* plan, Clock* clock,
              const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (plan != nullptr) {
    if (int rc = SpecFromPlan(f, *plan, clock, &spec); rc >= 0) return rc;
  } else if (!ReadSpec(f, &spec)) {
    return 2;
  }
  FederatedClientOptions o;
  o.target = f.connect;
  o.experiment_id = f.experiment_id;
  o.region = f.region;
  o.name = f.name;
  if (f.index < 0) {
    std::cerr << "sextant-worker: a client needs --index N, its index in its region\n";
    return 2;
  }
  o.index = f.index;
  if (f.threads > 0) o.threads = f.threads;
  if (f.chunk_floats > 0) o.chunk_floats = f.chunk_floats;
  absl::StatusOr<int> global = GlobalClientIndex(spec.federation(), o.region, o.index);
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!global.ok() || !job.ok()) {
    std::cerr << "sextant-worker: " << (global.ok() ? job.status() : global.status()) << "\n";
    return 2;
  }
  o.global_index = *global;
  o.job = *job;
  o.log = &std::cout;
  if (!f.work_dir.empty()) o.work_dir = f.work_dir;
  if (!f.data_dir.empty()) {
    // The command runs from the experiment's folder: a relative folder is this process's.
    std::error_code ec;
    o.data_dir = std::filesystem::absolute(f.data_dir, ec).lexically_normal().string();
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds;
  if (f.server_identity.empty()) {
    creds = LoadChannelCredentials(f.tls_dir, TlsName(f, "worker"), f.secret_file);
  } else if (absl::StatusOr<PeerIdentity> server = ParseIdentityUri(f.server_identity);
             server.ok()) {
    creds = LoadChannelCredentialsForServer(f.tls_dir, TlsName(f, "worker"), *server);
  } else {
    creds = server.status();
  }
  if (!creds.ok()) {
    std::cerr << "sextant-worker: " << (f.tls_dir.empty() ? "--secret-file" : "--tls-dir") << ": "
              << creds.status().message() << "\n";
    return 2;
  }
  if (absl::Status s = CheckDialAllowed(o.target, !f.tls_dir.empty()); !s.ok()) {
    std::cerr << "sextant-worker: " << s.message() << "\n";
    return 2;
  }
  o.stub = v1::FederationService::NewStub(DialPeer(o.target, *creds));
  if (!f.address_file.empty()) {
    o.redial =
        RedialFromAddressFile(f.address_file, o.target, *creds, !f.tls_dir.empty(), &std::cout);
  }
  if (!f.tls_dir.empty()) {
    absl::StatusOr<std::unique_ptr<KeySigner>> signer =
        KeySigner::Load(f.tls_dir, TlsName(f, "worker"));
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
int RunEvaluatorRole(const FederatedFlags& f, Clock* clock, const std::atomic<bool>* stop) {
  v1::ExperimentSpec spec;
  if (!ReadSpec(f, &spec)) return 2;
  absl::StatusOr<FederatedJob> job = FederatedJobFromSpec(spec);
  if (!job.ok()) {
    std::cerr << "sextant-worker: " << job.status() << "\n";
    return 2;
  }
  EvaluatorOptions o;
  o.job = *job;
  o.dir = f.work_dir;
  if (o.dir.empty()) {
    std::cerr << "sextant-worker: an evaluator needs --work-dir DIR\n";
    return 2;
  }
  if (f.threads > 0) o.threads = f.threads;
  absl::Status s = RunEvaluator(o, clock, stop);
  if (!s.ok()) {
    std::cerr << "sextant-worker: evaluator: " << s << "\n";
    return 1;
  }
  return 0;
}

int RunAggregator(const FederatedFlags& f, const v1::JoinPlan* plan, Clock* clock,
                  const std::atomic<bool>* stop, const ServerInterceptors& interceptors) {
  if ((plan == nullptr && f.spec.empty()) || f.model_size <= 0 || f.work_dir.empty()) {
    std::cerr << "sextant-worker: an aggregator needs --spec FILE (the experiment; with --join "
                 "its plan brings it), --model-size N and --work-dir DIR\n";
    return 2;
  }
  v1::ExperimentSpec spec;
  if (plan != nullptr) {
    if (int rc = SpecFromPlan(f, *plan, clock, &spec); rc >= 0) return rc;
  } else if (!ReadSpec(f, &spec)) {
    return 2;
  }
  RegionalAggregatorOptions o;
  o.interceptors = interceptors;
  if (plan != nullptr) {  // its clients are started by hand too, and join here
    o.join_clients = true;
    o.client_spec = plan->spec();
    o.client_spec_signature = plan->spec_signature();
    o.client_spec_certificate = plan->spec_certificate();
    o.client_spec_expires_at = plan->expires_at();
  }
  o.upstream = f.connect;
  o.experiment_id = f.experiment_id;
  o.region = f.region;
  o.work_dir = f.work_dir;
  if (!f.listen.empty()) {
    absl::StatusOr<std::string> listen = ResolveListen(f.listen, f.connect);
    if (!listen.ok()) {
      std::cerr << "sextant-worker: " << listen.status().message() << "\n";
      return 2;
    }
    o.listen = *listen;
  }
  o.port_file = f.port_file;
  o.address_file = f.address_file;
  o.model_size = f.model_size;
  if (f.chunk_floats > 0) o.chunk_floats = f.chunk_floats;
  o.startup_wait_seconds = f.startup_wait;
  if (absl::Status s = ApplyExperiment(spec, &o); !s.ok()) {
    std::cerr << "sextant-worker: the experiment" << (plan ? " of the plan" : " in " + f.spec)
              << ": " << s.message() << "\n";
    return 2;
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
  FederatedFlags f;
  if (int rc = ParseFlags(argc, argv, &f); rc >= 0) return rc;
  if (f.role == "evaluator") {
    if (f.join) {
      std::cerr << "sextant-worker: --join is for aggregators and clients started by hand; the "
                   "evaluator runs beside the orchestrator\n";
      return 2;
    }
    return RunEvaluatorRole(f, clock, stop);
  }
  if (!f.join && f.given.count("--pool") > 0) {
    std::cerr << "sextant-worker: --pool applies to a participant started by hand (--join); the "
                 "run bills the participants it starts on their placement itself\n";
    return 2;
  }
  v1::JoinPlan plan;
  if (f.join && f.role == "client" && f.experiment_id.empty()) {
    // The aggregator that relays a client's plan is not trusted to say which run it is for.
    std::cerr << "sextant-worker: a client started by hand needs --experiment-id ID, the run's "
                 "id that `sextant run --external-participants` prints, so that no other run's "
                 "plan is taken for it\n";
    return 2;
  }
  if (f.join) {
    if (int rc = JoinByHand(f, clock, &plan); rc >= 0) return rc;
  }
  for (auto [name, value] : {std::pair{"--region", &f.region}, std::pair{"--connect", &f.connect},
                             std::pair{"--experiment-id", &f.experiment_id}}) {
    if (value->empty()) {
      std::cerr << "sextant-worker: " << name << " is required for a federated role\n";
      return 2;
    }
  }
  const v1::JoinPlan* p = f.join ? &plan : nullptr;
  return f.role == "aggregator" ? RunAggregator(f, p, clock, stop, interceptors)
                                : RunClient(f, p, clock, stop);
}

}  // namespace sextant
