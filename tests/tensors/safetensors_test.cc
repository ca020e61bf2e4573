// The safetensors reader and writer, against bytes laid out by hand in the reference format
// (never by the writer under test), files numpy writes, and every kind of malformed file.
#include "tensors/safetensors.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string U64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

std::string F32s(std::initializer_list<float> values) {
  std::string s(values.size() * 4, '\0');
  std::memcpy(s.data(), std::data(values), s.size());  // little-endian host
  return s;
}

std::string U16s(std::initializer_list<uint16_t> values) {
  std::string s;
  for (uint16_t v : values) {
    s.push_back(static_cast<char>(v & 0xff));
    s.push_back(static_cast<char>(v >> 8));
  }
  return s;
}

// The reference layout: u64 header length, the header, the data buffer.
std::string File(const std::string& header, const std::string& data) {
  return U64(header.size()) + header + data;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sextant-safetensors-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  size_t Entries() const {
    return std::distance(std::filesystem::directory_iterator(path_),
                         std::filesystem::directory_iterator());
  }

 private:
  std::string path_;
};

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(SafetensorsTest, ReadsAHandWrittenReferenceFileInOffsetOrder) {
  // Keys out of offset order, metadata first, the header padded with spaces as the reference
  // writer pads it.
  const std::string header = R"({"__metadata__":{"format":"pt","note":"hand"},)"
                             R"("b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   )";
  absl::StatusOr<TensorFile> f =
      ParseSafetensors(File(header, F32s({1.5f, -2.0f}) + U16s({0x3c00, 0xc000})));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 2u);
  EXPECT_EQ(f->tensors[0].name, "a");
  EXPECT_EQ(f->tensors[0].dtype, DType::kF32);
  EXPECT_EQ(f->tensors[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(*f->tensors[0].ToF32(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f->tensors[1].name, "b");
  EXPECT_EQ(f->tensors[1].dtype, DType::kF16);
  EXPECT_EQ(*f->tensors[1].ToF32(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(f->metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand"}}));
}

TEST(SafetensorsTest, ReadsScalarsEmptyTensorsAndBF16) {
  const std::string header = R"({"s":{"dtype":"BF16","shape":[],"data_offsets":[0,2]},)"
                             R"("e":{"dtype":"F32","shape":[4,0],"data_offsets":[2,2]},)"
                             R"("m":{"dtype":"BF16","shape":[1,2],"data_offsets":[2,6]}})";
  absl::StatusOr<TensorFile> f = ParseSafetensors(File(header, U16s({0x3f80, 0xc040, 0x4000})));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 3u);
  EXPECT_EQ(f->tensors[0].name, "s");
  EXPECT_TRUE(f->tensors[0].shape.empty());
  EXPECT_EQ(*f->tensors[0].ToF32(), (std::vector<float>{1.0f}));
  EXPECT_EQ(f->tensors[1].name, "e");
  EXPECT_TRUE(f->tensors[1].data.empty());
  EXPECT_EQ(*f->tensors[2].ToF32(), (std::vector<float>{-3.0f, 2.0f}));
  EXPECT_TRUE(f->metadata.empty());
}

TEST(SafetensorsTest, AnEmptyModelIsTwoBytesOfHeader) {
  absl::StatusOr<TensorFile> f = ParseSafetensors(File("{}", ""));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->tensors.empty());
}

TEST(SafetensorsTest, WriterProducesTheReferenceLayoutByteForByte) {
  TensorFile f;
  f.metadata["format"] = "pt";
  f.tensors.push_back({.name = "w", .dtype = DType::kF32, .shape = {2}, .data = F32s({1, 2})});
  f.tensors.push_back({.name = "b", .dtype = DType::kF16, .shape = {}, .data = U16s({0x3c00})});
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[],"data_offsets":[8,10]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  absl::StatusOr<std::string> bytes = SerializeSafetensors(f);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, File(padded, F32s({1, 2}) + U16s({0x3c00})));
  EXPECT_EQ((bytes->size() - 10) % 8, 0u);  // the data starts 8-byte aligned
}

TensorFile EveryDtype() {
  TensorFile f;
  f.metadata = {{"round", "3"}, {"by", "sextant"}};
  const std::vector<float> values = {0.0f, -1.0f, 0.5f, 3.0e-5f, 65504.0f, -7.25f};
  for (DType d : {DType::kBF16, DType::kF32, DType::kF16}) {
    Tensor t{.name = absl::StrCat("layer.", DTypeName(d)), .dtype = d, .shape = {2, 3}, .data = ""};
    EXPECT_TRUE(t.SetFromF32(values).ok());
    f.tensors.push_back(std::move(t));
  }
  return f;
}

void ExpectSameFile(const TensorFile& got, const TensorFile& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].name, want.tensors[i].name);
    EXPECT_EQ(got.tensors[i].dtype, want.tensors[i].dtype);
    EXPECT_EQ(got.tensors[i].shape, want.tensors[i].shape);
    EXPECT_EQ(got.tensors[i].data, want.tensors[i].data) << want.tensors[i].name;
  }
  EXPECT_EQ(got.metadata, want.metadata);
}

TEST(SafetensorsTest, EveryDtypeRoundTripsThroughABuffer) {
  const TensorFile f = EveryDtype();
  absl::StatusOr<std::string> bytes = SerializeSafetensors(f);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<TensorFile> back = ParseSafetensors(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameFile(*back, f);
}

TEST(SafetensorsTest, EveryDtypeRoundTripsThroughAFile) {
  TempDir dir;
  const TensorFile f = EveryDtype();
  ASSERT_TRUE(WriteSafetensors(dir.File("model.safetensors"), f).ok());
  absl::StatusOr<TensorFile> back = ReadSafetensors(dir.File("model.safetensors"));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameFile(*back, f);
  EXPECT_EQ(Slurp(dir.File("model.safetensors")), *SerializeSafetensors(f));
}

// The streaming forms move a flat f32 model to and from a file a chunk at a time: the bytes are
// exactly those of the whole-model path (UnflattenFromF32 + WriteSafetensors), the reader takes
// the file's tensors in any order, and a file whose layout differs is refused naming the tensor
// before any value is read.
TEST(SafetensorsTest, StreamingWriteAndReadMatchTheWholeModelPath) {
  TempDir dir;
  TensorFile layout;
  // 3 million values: the streams cross their chunk boundary (1 Mi elements) inside a tensor.
  layout.tensors = {Tensor{"big", DType::kF32, {3, 1000000}, {}},
                    Tensor{"half", DType::kF16, {2, 3}, {}},
                    Tensor{"brain", DType::kBF16, {4}, {}}};
  layout.metadata = {{"format", "pt"}};
  std::vector<float> flat(3000000 + 6 + 4);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<float>(i % 1000) / 8.0f - 60;
  const std::string streamed = dir.File("streamed.safetensors");
  ASSERT_TRUE(WriteSafetensorsFromF32(streamed, layout, flat).ok());
  absl::StatusOr<TensorFile> whole = UnflattenFromF32(layout, flat);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(Slurp(streamed), *SerializeSafetensors(*whole));

  // The file lists the tensors in another order than the layout the reader is given.
  TensorFile reordered;
  reordered.tensors = {whole->tensors[2], whole->tensors[0], whole->tensors[1]};
  const std::string other = dir.File("reordered.safetensors");
  ASSERT_TRUE(WriteSafetensors(other, reordered).ok());
  std::vector<float> back(flat.size(), -1);
  ASSERT_TRUE(ReadSafetensorsToF32(other, layout, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, *FlattenToF32(*whole));  // as narrowed to f16 and bf16

  // A renamed tensor is refused by name; a wrong-sized output or input before anything moves.
  reordered.tensors[0].name = "brains";
  ASSERT_TRUE(WriteSafetensors(other, reordered).ok());
  absl::Status renamed = ReadSafetensorsToF32(other, layout, absl::MakeSpan(back));
  EXPECT_TRUE(absl::IsInvalidArgument(renamed));
  EXPECT_THAT(std::string(renamed.message()), HasSubstr("\"brains\""));
  EXPECT_THAT(std::string(renamed.message()), StartsWith(other));
  std::vector<float> short_out(10);
  EXPECT_TRUE(absl::IsInvalidArgument(
      ReadSafetensorsToF32(streamed, layout, absl::MakeSpan(short_out))));
  EXPECT_TRUE(absl::IsInvalidArgument(
      WriteSafetensorsFromF32(dir.File("x.safetensors"), layout, short_out)));
}

TEST(SafetensorsTest, WriteReplacesTheFileWholeAndLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string path = dir.File("model.safetensors");
  Put(path, "old contents");
  ASSERT_TRUE(WriteSafetensors(path, EveryDtype()).ok());
  EXPECT_EQ(dir.Entries(), 1u);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_TRUE(ReadSafetensors(path).ok());
}

TEST(SafetensorsTest, WriteRefusesAnInvalidModelNamingTheTensorAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.File("model.safetensors");
  struct Case {
    TensorFile file;
    std::string message;
  };
  std::vector<Case> cases;
  TensorFile twice = EveryDtype();
  twice.tensors.push_back(twice.tensors[0]);
  cases.push_back({twice, "tensor \"layer.BF16\" appears twice"});
  TensorFile reserved = EveryDtype();
  reserved.tensors[1].name = "__metadata__";
  cases.push_back({reserved, "__metadata__ is the reserved metadata key"});
  TensorFile short_data = EveryDtype();
  short_data.tensors[2].data.pop_back();
  cases.push_back({short_data, "tensor \"layer.F16\": 11 bytes of data where F16 [2,3] needs 12"});
  TensorFile negative = EveryDtype();
  negative.tensors[0].shape = {-2, -3};
  cases.push_back({negative, "tensor \"layer.BF16\": invalid shape [-2,-3]"});
  TensorFile not_utf8 = EveryDtype();
  not_utf8.tensors[0].name = "bad\xff";
  cases.push_back({not_utf8, "tensor \"bad\\xff\": the name is not valid UTF-8"});
  TensorFile bad_metadata = EveryDtype();
  bad_metadata.metadata["k"] = "\xc3";
  cases.push_back({bad_metadata, "__metadata__: the entry \"k\" is not valid UTF-8"});
  for (const Case& c : cases) {
    absl::Status s = WriteSafetensors(path, c.file);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
    EXPECT_EQ(SerializeSafetensors(c.file).status(), s);
    EXPECT_EQ(dir.Entries(), 0u) << c.message;
  }
}

TEST(SafetensorsTest, WriteIntoAMissingDirectoryIsNotFound) {
  TempDir dir;
  absl::Status s = WriteSafetensors(dir.File("no/such/model.safetensors"), EveryDtype());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("no/such/model.safetensors"));
}

TEST(SafetensorsTest, ReadingAMissingFileIsNotFoundNamingIt) {
  TempDir dir;
  absl::StatusOr<TensorFile> f = ReadSafetensors(dir.File("absent.safetensors"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("absent.safetensors"));
}

TEST(SafetensorsTest, ReadingADirectoryIsRefused) {
  TempDir dir;
  Put(dir.File("x"), "");
  absl::StatusOr<TensorFile> f =
      ReadSafetensors(std::filesystem::path(dir.File("x")).parent_path());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("not a regular file"));
}

TEST(SafetensorsTest, ReadingAFifoIsRefusedWithoutWaitingForAWriter) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.File("fifo").c_str(), 0600), 0);
  absl::StatusOr<TensorFile> f = ReadSafetensors(dir.File("fifo"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("not a regular file"));
}

TEST(SafetensorsTest, ABadFileIsRefusedNamingTheFileAndTheTensor) {
  TempDir dir;
  const std::string path = dir.File("client.safetensors");
  Put(path, File(R"({"fc1.weight":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                 std::string(8, '\0')));
  absl::StatusOr<TensorFile> f = ReadSafetensors(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()),
              StartsWith(path + ": tensor \"fc1.weight\": dtype \"F64\""));
}

TEST(SafetensorsTest, AHeaderLengthPastTheFileIsRefusedByTheFileSize) {
  TempDir dir;
  const std::string path = dir.File("cut.safetensors");
  Put(path, U64(1000) + "{}");  // claims a 1000-byte header in a 10-byte file
  absl::StatusOr<TensorFile> f = ReadSafetensors(path);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.status().message(),
            path + ": the header length 1000 goes past the end of the 10-byte file");
  EXPECT_EQ(ParseSafetensors(U64(1000) + "{}").status().message(),
            "the header length 1000 goes past the end of the 10-byte file");
}

TEST(SafetensorsTest, AHeaderLengthOver100MBIsRefusedBeforeReadingIt) {
  for (uint64_t n : {uint64_t{100'000'001}, ~uint64_t{0}}) {
    absl::StatusOr<TensorFile> f = ParseSafetensors(U64(n) + "{}");
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(f.status().message()),
        HasSubstr(absl::StrCat("the header length ", n, " is over the limit of 100000000")));
  }
}

TEST(SafetensorsLayoutTest, ReadsNamesDtypesShapesAndOrderWithoutTheData) {
  TempDir dir;
  const std::string path = dir.File("model.safetensors");
  Put(path, File(R"({"__metadata__":{"format":"pt"},)"
                 R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                 R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})",
                 F32s({1.5f, -2.0f}) + U16s({0x3f80, 0xc040})));
  absl::StatusOr<TensorFile> f = ReadSafetensorsLayout(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 2u);
  EXPECT_EQ(f->tensors[0].name, "a");
  EXPECT_EQ(f->tensors[0].dtype, DType::kF32);
  EXPECT_EQ(f->tensors[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(f->tensors[0].data.empty());
  EXPECT_EQ(f->tensors[1].name, "b");
  EXPECT_EQ(f->tensors[1].dtype, DType::kBF16);
  EXPECT_TRUE(f->tensors[1].data.empty());
  EXPECT_EQ(f->metadata.at("format"), "pt");
}

TEST(SafetensorsLayoutTest, ChecksTheHeaderAgainstTheFileSizeAsTheFullReadDoes) {
  TempDir dir;
  const std::string cut = dir.File("cut.safetensors");
  // The header promises 8 bytes of data; the file holds 4.
  Put(cut, File(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", F32s({1.0f})));
  absl::StatusOr<TensorFile> f = ReadSafetensorsLayout(cut);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), StartsWith(cut + ": tensor \"w\": data_offsets"));
  EXPECT_EQ(f.status(), ReadSafetensors(cut).status());
  const std::string f64 = dir.File("f64.safetensors");
  Put(f64, File(R"({"fc1.weight":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                std::string(8, '\0')));
  EXPECT_THAT(std::string(ReadSafetensorsLayout(f64).status().message()),
              StartsWith(f64 + ": tensor \"fc1.weight\": dtype \"F64\""));
  EXPECT_TRUE(absl::IsNotFound(ReadSafetensorsLayout(dir.File("none")).status()));
}

TEST(SafetensorsTest, AFileShorterThanTheLengthFieldIsRefused) {
  TempDir dir;
  Put(dir.File("tiny"), "abc");
  EXPECT_THAT(std::string(ReadSafetensors(dir.File("tiny")).status().message()),
              HasSubstr("the 3-byte file is too short for the 8-byte header length"));
  EXPECT_EQ(ParseSafetensors("").status().code(), absl::StatusCode::kInvalidArgument);
}

// One malformed header: the bytes after it, and what the error must say.
struct BadHeader {
  std::string name;
  std::string header;
  std::string data;
  std::string message;
};

const std::string kW = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

std::vector<BadHeader> BadHeaders() {
  const std::string eight(8, '\0');
  const std::string twelve(12, '\0');
  auto w = [](const std::string& entry) { return absl::StrCat(R"({"w":)", entry, "}"); };
  std::string ones = "1";
  for (int i = 0; i < 64; ++i) ones += ",1";
  return {
      {"NotJson", R"({"w":)", eight,
       "the header is not valid JSON: parse error at line 1, column 6"},
      {"EmptyHeader", "", "", "the header is not valid JSON"},
      {"TrailingGarbage", kW + "x", eight, "the header is not valid JSON"},
      {"InvalidUtf8", "{\"\xff\":{}}", "",  // the message escapes the byte it quotes
       "the header is not valid JSON: parse error at line 1, column 3: syntax error while "
       "parsing object key - invalid string: ill-formed UTF-8 byte; last read: '\"\\xff'"},
      {"AnArray", "[1,2]", "", "the header is not a JSON object"},
      {"AString", R"("w")", "", "the header is not a JSON object"},
      {"UnknownDtype", w(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": dtype \"F64\" is not supported (F32, F16, BF16)"},
      {"DtypeNotAString", w(R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": dtype 4 is not supported"},
      {"NegativeDim", w(R"({"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": a dimension of the shape is negative"},
      {"FractionalDim", w(R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": a dimension of the shape is not an integer"},
      {"DimBeyondInt64",
       w(R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": shape [18446744073709551615] has a dimension too large"},
      {"ElementCountOverflows",
       w(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": the element count of shape [4294967296,4294967296] overflows"},
      {"ShapeNotAnArray", w(R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), eight,
       "tensor \"w\": shape is not an array"},
      {"RankOver64", w(R"({"dtype":"F32","shape":[)" + ones + R"(],"data_offsets":[0,4]})"),
       std::string(4, '\0'), "tensor \"w\": an array of more than 64 items"},
      {"NestedTooDeeply", w(R"({"dtype":"F32","shape":[[2]],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": nested too deeply"},
      {"ShapeDisagreesWithOffsets", w(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": data_offsets [0,8] hold 8 bytes where F32 [3] needs 12"},
      {"DtypeSizeDisagreesWithOffsets", w(R"({"dtype":"F16","shape":[2],"data_offsets":[0,8]})"),
       eight, "tensor \"w\": data_offsets [0,8] hold 8 bytes where F16 [2] needs 4"},
      {"OffsetsPastTheData", w(R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), eight,
       "tensor \"w\": data_offsets [0,16] go past the end of the 8-byte data buffer"},
      {"OffsetsFarPastTheFile",
       w(R"({"dtype":"F32","shape":[1152921504606846976],"data_offsets":[0,4611686018427387904]})"),
       eight, "go past the end of the 8-byte data buffer"},
      {"BeginAfterEnd", w(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), eight,
       "tensor \"w\": data_offsets [8,0] begin after they end"},
      {"NegativeOffset", w(R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), eight,
       "tensor \"w\": the begin of data_offsets is negative"},
      {"OffsetsNotAPair", w(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4,8]})"), eight,
       "tensor \"w\": data_offsets is not an array [begin, end]"},
      {"Overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       twelve, "tensor \"b\": data_offsets [4,12] overlap tensor \"a\" at [0,8]"},
      {"EmptyTensorInsideAnother",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
       eight, "tensor \"z\": data_offsets [4,4] overlap tensor \"a\" at [0,8]"},
      {"Gap",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       twelve,
       "tensor \"b\": data_offsets [8,12] leave bytes [4,8) of the data buffer to no tensor"},
      {"TrailingBytes", w(R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), eight,
       "tensor \"w\": the last tensor ends at byte 4 of the 8-byte data buffer"},
      {"DataWithNoTensor", "{}", eight, "the 8-byte data buffer holds no tensor"},
      {"DuplicateName",
       R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, "tensor \"w\" appears twice"},
      {"DuplicateKeyInAnEntry",
       w(R"({"dtype":"F32","dtype":"F16","shape":[2],"data_offsets":[0,8]})"), eight,
       "tensor \"w\": key \"dtype\" appears twice"},
      {"UnknownKeyInAnEntry",
       w(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"offsets":[0,8]})"), eight,
       "tensor \"w\": unknown key \"offsets\""},
      {"MissingKey", w(R"({"dtype":"F32","shape":[2]})"), eight,
       "tensor \"w\": the entry needs dtype, shape and data_offsets"},
      {"EntryNotAnObject", w("[0,8]"), eight, "tensor \"w\": the entry is not an object"},
      {"NonStringMetadata", R"({"__metadata__":{"epoch":3}})", "",
       "__metadata__: the value of \"epoch\" is not a string"},
      {"MetadataNotAnObject", R"({"__metadata__":"pt"})", "",
       "__metadata__ is not an object of strings"},
      {"MetadataTwice", R"({"__metadata__":{},"__metadata__":{}})", "",
       "__metadata__ appears twice"},
  };
}

class SafetensorsBadHeaderTest : public ::testing::TestWithParam<BadHeader> {};

TEST_P(SafetensorsBadHeaderTest, IsRefusedWithAnErrorNamingTheCulprit) {
  const BadHeader& c = GetParam();
  absl::StatusOr<TensorFile> f = ParseSafetensors(File(c.header, c.data));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(c.message));
  // From a file, the same error follows the file's path.
  TempDir dir;
  Put(dir.File("m.safetensors"), File(c.header, c.data));
  absl::StatusOr<TensorFile> g = ReadSafetensors(dir.File("m.safetensors"));
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.status().message(),
            absl::StrCat(dir.File("m.safetensors"), ": ", f.status().message()));
}

INSTANTIATE_TEST_SUITE_P(Cases, SafetensorsBadHeaderTest, ::testing::ValuesIn(BadHeaders()),
                         [](const auto& info) { return info.param.name; });

bool HasNumpy() { return std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0; }

// Written with struct, json and numpy only, in the reference layout (sorted keys, header padded
// with spaces to 8 bytes). numpy has no bfloat16: the BF16 tensor is the upper halves of float32
// values that bfloat16 holds exactly.
constexpr char kNumpyWriter[] = R"(
import json, struct, sys
import numpy as np
tensors = [
    ("fc1.weight", "F32", (np.arange(6, dtype=np.float32).reshape(2, 3) / 4).astype('<f4')),
    ("fc1.bias", "F16", np.array([1.5, -2.0, 65504.0, 2.0 ** -24], dtype='<f2')),
    ("emb", "BF16", (np.array([1.0, -3.0, 0.15625], dtype='<f4').view('<u4') >> 16).astype('<u2')),
]
header, chunks, offset = {"__metadata__": {"format": "np"}}, [], 0
for name, dtype, a in tensors:
    raw = a.tobytes()
    header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
    chunks.append(raw)
    offset += len(raw)
h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
)";

// Reads what ReadsAFileNumpyWrote wrote back, by the reference layout; exits 1 on a difference.
constexpr char kNumpyReader[] = R"(
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h, data = json.loads(b[8:8 + n]), b[8 + n:]
def get(name, dt):
    begin, end = h[name]["data_offsets"]
    return np.frombuffer(data[begin:end], dtype=dt).reshape(h[name]["shape"])
ok = (n % 8 == 0 and sorted(h) == ["__metadata__", "emb", "fc1.bias", "fc1.weight"]
      and h["__metadata__"] == {"format": "np"}
      and (get("fc1.weight", "<f4") == np.arange(6, dtype=np.float32).reshape(2, 3) / 4).all()
      and (get("fc1.bias", "<f2") == np.array([1.5, -2.0, 65504.0, 2.0 ** -24], "<f2")).all()
      and (get("emb", "<u2").astype("<u4") << 16).view("<f4").tolist() == [1.0, -3.0, 0.15625]
      and len(data) == sum(e["data_offsets"][1] - e["data_offsets"][0]
                           for k, e in h.items() if k != "__metadata__"))
sys.exit(0 if ok else 1)
)";

TEST(SafetensorsTest, ReadsAFileNumpyWrote) {
  SEXTANT_REQUIRE_COMPONENT(HasNumpy(), "python3 with numpy is not installed");
  TempDir dir;
  Put(dir.File("write.py"), kNumpyWriter);
  const std::string path = dir.File("np.safetensors");
  ASSERT_EQ(std::system(("/usr/bin/python3 " + dir.File("write.py") + " " + path).c_str()), 0);
  absl::StatusOr<TensorFile> f = ReadSafetensors(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 3u);
  EXPECT_EQ(f->metadata.at("format"), "np");
  const Tensor* w = f->Find("fc1.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*w->ToF32(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f}));
  const Tensor* b = f->Find("fc1.bias");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(*b->ToF32(), (std::vector<float>{1.5f, -2.0f, 65504.0f, 1.0f / (1 << 24)}));
  const Tensor* e = f->Find("emb");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::kBF16);
  EXPECT_EQ(*e->ToF32(), (std::vector<float>{1.0f, -3.0f, 0.15625f}));
  // Written back by this library, Python reads the same tensors with json, struct and numpy.
  ASSERT_TRUE(WriteSafetensors(path, *f).ok());
  Put(dir.File("read.py"), kNumpyReader);
  EXPECT_EQ(std::system(("/usr/bin/python3 " + dir.File("read.py") + " " + path).c_str()), 0);
}

}  // namespace
}  // namespace sextant
