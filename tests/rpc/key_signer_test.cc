#include "rpc/key_signer.h"

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/certificates.h"
#include "rpc/identity.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

class KeySignerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ca_ = *CreateCertificateAuthority("test CA", 1);
    alice_ = Signer(ca_, PeerIdentity{Role::kClient, "eu", "alice"});
    bob_ = Signer(ca_, PeerIdentity{Role::kClient, "eu", "bob"});
    agg_ = Signer(ca_, PeerIdentity{Role::kAggregator, "eu", "agg"});
    us_agg_ = Signer(ca_, PeerIdentity{Role::kAggregator, "us", "agg"});
    carol_ = Signer(ca_, PeerIdentity{Role::kClient, "us", "carol"});
  }
  static std::unique_ptr<KeySigner> Signer(const KeyPair& ca, const PeerIdentity& id) {
    auto cert = IssueCertificate(ca, id.name, {}, 1, &id);
    EXPECT_TRUE(cert.ok()) << cert.status();
    auto signer = KeySigner::Create(ca.cert_pem, cert->cert_pem, cert->key_pem);
    EXPECT_TRUE(signer.ok()) << signer.status();
    return *std::move(signer);
  }
  static std::string Binding(const std::string& id, const std::string& key = std::string(32, 'k'),
                             int64_t round = 3, int32_t index = 1) {
    return KeyBinding("exp", round, index, id, key, std::string(32, 'm'));
  }
  KeyPair ca_;
  std::unique_ptr<KeySigner> alice_, bob_, agg_, us_agg_, carol_;
};

TEST_F(KeySignerTest, APeersOwnSignatureOverItsKeysVerifies) {
  auto a = alice_->Sign(Binding("eu/alice"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(bob_->Verify(*a, Binding("eu/alice"), "eu/alice").ok());
  // A region's aggregator signs for the region in the regions' round; the other regions'
  // aggregators check it.
  auto g = agg_->Sign(Binding("eu"));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(us_agg_->Verify(*g, Binding("eu"), "eu").ok());
}

TEST_F(KeySignerTest, SwappedKeysAnotherIdentityAnotherRoundOrNoSignatureAreRefused) {
  auto a = alice_->Sign(Binding("eu/alice"));
  ASSERT_TRUE(a.ok());
  // The aggregator swapped in its own key for Alice's.
  absl::Status swapped = bob_->Verify(*a, Binding("eu/alice", std::string(32, 'X')), "eu/alice");
  EXPECT_EQ(swapped.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(swapped.message(), HasSubstr("'eu/alice'"));
  EXPECT_THAT(swapped.message(), HasSubstr("signature does not match"));
  // Alice's signed keys relayed as Bob's, replayed into another round, or at another index.
  EXPECT_THAT(bob_->Verify(*a, Binding("eu/bob"), "eu/bob").message(),
              HasSubstr("signed by sextant://client/eu/alice"));
  EXPECT_FALSE(bob_->Verify(*a, Binding("eu/alice", std::string(32, 'k'), 4), "eu/alice").ok());
  EXPECT_FALSE(bob_->Verify(*a, Binding("eu/alice", std::string(32, 'k'), 3, 2), "eu/alice").ok());
  // Nothing signed, or signed by a certificate of another CA naming Alice.
  EXPECT_THAT(bob_->Verify(KeyAttestation{}, Binding("eu/alice"), "eu/alice").message(),
              HasSubstr("no signature"));
  auto mallory =
      Signer(*CreateCertificateAuthority("other", 1), PeerIdentity{Role::kClient, "eu", "alice"});
  auto forged = mallory->Sign(Binding("eu/alice", std::string(32, 'X')));
  ASSERT_TRUE(forged.ok());
  EXPECT_THAT(
      bob_->Verify(*forged, Binding("eu/alice", std::string(32, 'X')), "eu/alice").message(),
      HasSubstr("not from this run's CA"));
  // An aggregator's certificate does not speak for a client.
  auto g = agg_->Sign(Binding("eu/alice"));
  EXPECT_FALSE(bob_->Verify(*g, Binding("eu/alice"), "eu/alice").ok());
}

// Who may be a peer follows from the verifier's own identity, not from the id the aggregator
// relays: a regional aggregator that slips in its own keys under its region's id, or a client
// of another region, is refused by a client; a client is refused in the regions' round.
TEST_F(KeySignerTest, PeersAreTheVerifiersOwnKindNotWhatTheRelaySays) {
  auto own = agg_->Sign(Binding("eu"));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(bob_->Verify(*own, Binding("eu"), "eu").code(), absl::StatusCode::kPermissionDenied);
  auto other_region = carol_->Sign(Binding("us/carol"));
  ASSERT_TRUE(other_region.ok());
  EXPECT_FALSE(bob_->Verify(*other_region, Binding("us/carol"), "us/carol").ok());
  auto client = alice_->Sign(Binding("eu/alice"));
  EXPECT_FALSE(us_agg_->Verify(*client, Binding("eu/alice"), "eu/alice").ok());
  // A signer is only made from a key that is its certificate's, for a client or an aggregator.
  const PeerIdentity worker{Role::kWorker, "", "w"};
  auto w = IssueCertificate(ca_, "w", {}, 1, &worker);
  EXPECT_FALSE(KeySigner::Create(ca_.cert_pem, w->cert_pem, w->key_pem).ok());
  const PeerIdentity dave{Role::kClient, "eu", "dave"};
  auto d = IssueCertificate(ca_, "dave", {}, 1, &dave);
  EXPECT_FALSE(KeySigner::Create(ca_.cert_pem, d->cert_pem, w->key_pem).ok());
}

// The aggregator's own check as keys arrive: signed by the caller's own certificate, over these
// keys.
TEST_F(KeySignerTest, TheAggregatorTakesOnlyKeysSignedWithTheCallersOwnCertificate) {
  auto a = alice_->Sign(Binding("eu/alice"));
  auto b = bob_->Sign(Binding("eu/bob"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(CheckOwnAttestation(*a, Binding("eu/alice"), a->certificate_pem).ok());
  // Bob's signature sent by Alice, keys other than those signed, nothing signed.
  EXPECT_EQ(CheckOwnAttestation(*b, Binding("eu/bob"), a->certificate_pem).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(
      CheckOwnAttestation(*a, Binding("eu/alice", std::string(32, 'X')), a->certificate_pem).code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(CheckOwnAttestation(KeyAttestation{a->certificate_pem, ""}, Binding("eu/alice"),
                                   a->certificate_pem)
                   .ok());
}

// The experiment a participant started by hand runs is the orchestrator's as it signed it: an
// aggregator that relays it can change nothing, nor sign one of its own, and another CA's
// orchestrator is not this run's.
TEST(ExperimentSignatureTest, OnlyTheOrchestratorsSignatureOverTheSameExperimentVerifies) {
  char tmpl[] = "/tmp/sextant-spec-sig-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  ASSERT_TRUE(InitCertificateDirectory(dir + "/certs", {"orchestrator.example.org"}).ok());
  ASSERT_TRUE(InitCertificateDirectory(dir + "/other", {}).ok());
  const std::string ca = *ReadFileIfPresent(dir + "/certs/ca.pem");
  const std::string binding = ExperimentBinding("exp-1", "the experiment", 1800000000);
  absl::StatusOr<KeyAttestation> sig = SignAsOrchestrator(dir + "/certs", binding);
  ASSERT_TRUE(sig.ok()) << sig.status();
  EXPECT_TRUE(VerifyOrchestratorSignature(ca, *sig, binding).ok());
  // Another experiment, another run's id for it, or another expiry.
  EXPECT_TRUE(absl::IsPermissionDenied(VerifyOrchestratorSignature(
      ca, *sig, ExperimentBinding("exp-1", "client_command: evil", 1800000000))));
  EXPECT_TRUE(absl::IsPermissionDenied(VerifyOrchestratorSignature(
      ca, *sig, ExperimentBinding("exp-2", "the experiment", 1800000000))));
  EXPECT_TRUE(absl::IsPermissionDenied(VerifyOrchestratorSignature(
      ca, *sig, ExperimentBinding("exp-1", "the experiment", 1900000000))));
  // No signature; another CA's orchestrator.
  EXPECT_TRUE(absl::IsPermissionDenied(VerifyOrchestratorSignature(ca, {}, binding)));
  absl::StatusOr<KeyAttestation> other = SignAsOrchestrator(dir + "/other", binding);
  ASSERT_TRUE(other.ok());
  const absl::Status foreign = VerifyOrchestratorSignature(ca, *other, binding);
  EXPECT_THAT(std::string(foreign.message()), HasSubstr("not from this CA"));
  // An aggregator of this CA signing an experiment of its own (it may serve TLS too).
  absl::StatusOr<std::unique_ptr<KeySigner>> agg = KeySigner::Load(dir + "/certs", "aggregator");
  ASSERT_TRUE(agg.ok()) << agg.status();
  absl::StatusOr<KeyAttestation> forged = (*agg)->Sign(binding);
  ASSERT_TRUE(forged.ok());
  const absl::Status by_aggregator = VerifyOrchestratorSignature(ca, *forged, binding);
  EXPECT_TRUE(absl::IsPermissionDenied(by_aggregator));
  EXPECT_THAT(std::string(by_aggregator.message()), HasSubstr("sextant://aggregator/"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sextant
