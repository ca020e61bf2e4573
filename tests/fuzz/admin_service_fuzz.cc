// Fuzz target: the checks every RPC passes before it reaches a service, and the AdminService's
// own check: RoleAuthProcessor::Process (client certificate enrolment, bearer token, the
// token's role against the method) on fuzzed call metadata and peer certificates, then
// CheckAdminCaller on the auth context it leaves, with the admin requests parsed from fuzzed
// bytes. Security from a real CA made at start-up: worker, aggregator and admin tokens, and
// (tag of the first record & 0x80) mTLS with three certificates enrolled: one without an
// identity (as issued before identities) and two with one (sextant://worker/-/w and
// sextant://admin/-/ops). Records (internal/records.h), by tag & 3: 0 the method (tag & 0x20:
// one of the real ones), 1 the authorization header (tag & 0x40: "Bearer " and a real token),
// 2 the peer certificate PEM (tag & 0x10: one of the enrolled ones, one of an unenrolled name or
// one from another CA), 3 a call: GetStatusRequest or (tag & 4) DrainRequest from the bytes,
// through both checks.
// Invariants: a call let through carries an enrolled certificate (with mTLS); when that
// certificate names an identity, the call's role and identity are the certificate's, whatever
// token it sends, and that role may call the method; otherwise it carries a known token whose
// role may call the method. An admin call is let through only with the admin role.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grpc/grpc_security_constants.h"
#include "orchestrator/service/admin_service.h"
#include "rpc/certificates.h"
#include "rpc/server_security.h"
#include "sextant/v1/admin_service.pb.h"
#include "tests/fuzz/internal/records.h"

namespace {

using sextant::Role;

// The properties a transport leaves on a call (the peer certificate), and those the processor
// adds. Plain storage: the harness stands in for gRPC's transport here.
class FuzzAuthContext final : public grpc::AuthContext {
 public:
  bool IsPeerAuthenticated() const override { return false; }
  std::vector<grpc::string_ref> GetPeerIdentity() const override { return {}; }
  std::string GetPeerIdentityPropertyName() const override { return ""; }
  std::vector<grpc::string_ref> FindPropertyValues(const std::string& name) const override {
    std::vector<grpc::string_ref> out;
    auto [lo, hi] = props_.equal_range(name);
    for (auto it = lo; it != hi; ++it) out.emplace_back(it->second);
    return out;
  }
  grpc::AuthPropertyIterator begin() const override { return Empty(); }
  grpc::AuthPropertyIterator end() const override { return Empty(); }
  void AddProperty(const std::string& key, const grpc::string_ref& value) override {
    props_.emplace(key, std::string(value.data(), value.size()));
  }
  bool SetPeerIdentityPropertyName(const std::string&) override { return false; }

 private:
  struct EmptyIterator : grpc::AuthPropertyIterator {};
  static grpc::AuthPropertyIterator Empty() { return EmptyIterator(); }
  std::multimap<std::string, std::string> props_;
};

struct World {
  std::string tokens[3] = {"worker-token-0123456789", "aggregator-token-0123456789",
                           "admin-token-0123456789"};
  // enrolled without an identity, unenrolled, another CA's, enrolled worker and admin identities
  std::string certs[5];
  std::set<std::string> enrolled;
  sextant::ServerSecurity with_mtls, tokens_only;
};

const World& TheWorld() {
  static const World* world = [] {
    auto* w = new World;
    auto ca = sextant::CreateCertificateAuthority("fuzz-ca", 30);
    auto other = sextant::CreateCertificateAuthority("other-ca", 30);
    if (!ca.ok() || !other.ok()) abort();
    const sextant::KeyPair* issuers[3] = {&*ca, &*ca, &*other};
    for (int i = 0; i < 3; ++i) {
      auto kp = sextant::IssueCertificate(*issuers[i], i == 0 ? "worker" : "stranger", {}, 30);
      if (!kp.ok()) abort();
      w->certs[i] = kp->cert_pem;
    }
    const sextant::PeerIdentity identities[2] = {{Role::kWorker, "", "w"},
                                                 {Role::kAdmin, "", "ops"}};
    for (int i = 0; i < 2; ++i) {
      auto kp = sextant::IssueCertificate(*ca, identities[i].name, {}, 30, &identities[i]);
      if (!kp.ok()) abort();
      w->certs[3 + i] = kp->cert_pem;
    }
    for (int i : {0, 3, 4}) w->enrolled.insert(*sextant::CertificateFingerprint(w->certs[i]));
    for (sextant::ServerSecurity* s : {&w->with_mtls, &w->tokens_only}) {
      s->cert_pem = "unused";  // Process reads only the enrolment list and tokens
      s->tokens = {{w->tokens[0], Role::kWorker},
                   {w->tokens[1], Role::kAggregator},
                   {w->tokens[2], Role::kAdmin}};
    }
    w->with_mtls.ca_pem = ca->cert_pem;
    w->with_mtls.enrolled = w->enrolled;
    return w;
  }();
  return *world;
}

const char* kMethods[] = {
    "/sextant.v1.AdminService/GetStatus",       "/sextant.v1.AdminService/Drain",
    "/sextant.v1.WorkerService/Register",       "/sextant.v1.WorkerService/Lease",
    "/sextant.v1.WorkerService/Heartbeat",      "/sextant.v1.WorkerService/Report",
    "/sextant.v1.WorkerService/Complete",       "/sextant.v1.FederationService/GetRound",
    "/sextant.v1.FederationService/PushUpdate", "/grpc.health.v1.Health/Check"};

struct Call {
  std::string method, authorization, peer_pem;
  bool has_authorization = false, has_peer = false;
};

void Check(const World& w, const sextant::ServerSecurity& security, const Call& call) {
  grpc::AuthMetadataProcessor::InputMetadata metadata;
  metadata.emplace(":path", call.method);
  if (call.has_authorization) metadata.emplace("authorization", call.authorization);
  FuzzAuthContext context;
  if (call.has_peer) context.AddProperty(GRPC_X509_PEM_CERT_PROPERTY_NAME, call.peer_pem);
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  sextant::RoleAuthProcessor processor(security);
  grpc::Status s = processor.Process(metadata, &context, &consumed, &response);
  std::optional<Role> role = sextant::RoleOf(context);
  const bool admin_ok = sextant::CheckAdminCaller(&context, true).ok();
  if (!s.ok()) {
    if (role.has_value() || s.error_message().empty()) abort();
    return;
  }
  if (!security.enrolled.empty()) {
    auto fp = sextant::CertificateFingerprint(call.peer_pem);
    if (!call.has_peer || !fp.ok() || !w.enrolled.count(*fp)) abort();
  }
  std::optional<sextant::PeerIdentity> identity;
  if (!security.ca_pem.empty() && call.has_peer) {
    if (auto id = sextant::IdentityFromCertificate(call.peer_pem); id.ok()) identity = *id;
  }
  if (identity) {
    if (role != identity->role || sextant::IdentityOf(context) != identity) abort();
    if (!sextant::AllowedRoles(call.method, /*from_certificate=*/true).count(*role)) abort();
  } else {
    if (sextant::IdentityOf(context).has_value()) abort();
    const std::string bearer = "Bearer ";
    if (!call.has_authorization || call.authorization.compare(0, bearer.size(), bearer) != 0) {
      abort();
    }
    auto known = security.tokens.find(call.authorization.substr(bearer.size()));
    if (known == security.tokens.end() || role != known->second) abort();
    if (!sextant::AllowedRoles(call.method).count(*role)) abort();
  }
  if (admin_ok != (*role == Role::kAdmin)) abort();
  if (call.method.rfind("/sextant.v1.AdminService/", 0) == 0 && *role != Role::kAdmin) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const World& w = TheWorld();
  std::vector<sextant::fuzz::Record> records = sextant::fuzz::SplitRecords(data, size, 16);
  const bool mtls = !records.empty() && (records[0].tag & 0x80) != 0;
  const sextant::ServerSecurity& security = mtls ? w.with_mtls : w.tokens_only;
  Call call;
  for (const sextant::fuzz::Record& r : records) {
    const uint8_t pick = r.bytes.empty() ? 0 : static_cast<uint8_t>(r.bytes[0]);
    switch (r.tag & 3) {
      case 0:
        call.method = (r.tag & 0x20) ? kMethods[pick % 10] : r.bytes;
        break;
      case 1:
        call.has_authorization = true;
        call.authorization = (r.tag & 0x40) ? "Bearer " + w.tokens[pick % 3] : r.bytes;
        break;
      case 2:
        call.has_peer = true;
        call.peer_pem = (r.tag & 0x10) ? w.certs[pick % 5] : r.bytes;
        break;
      case 3: {
        sextant::v1::GetStatusRequest status;
        sextant::v1::DrainRequest drain;
        if ((r.tag & 4) ? !drain.ParseFromString(r.bytes) : !status.ParseFromString(r.bytes)) break;
        Check(w, security, call);
        break;
      }
    }
  }
  Check(w, security, call);
  return 0;
}
