#include "tensors/internal/header.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "tensors/safetensors.h"

namespace sextant::internal {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kMetadataKey = "__metadata__";

// `s` as a JSON string literal; nullopt when it is not valid UTF-8 (nlohmann throws on that).
std::optional<std::string> Quoted(const std::string& s) {
  try {
    return Json(s).dump();
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

// `s` with control bytes, and every non-ASCII byte when `s` is not UTF-8, as \xNN: an error
// message stays printable and valid UTF-8 whatever bytes a name holds.
std::string Printable(absl::string_view s) {
  const bool utf8 = Quoted(std::string(s)).has_value();
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && !utf8)) {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::string Subject(absl::string_view key) {
  if (key == kMetadataKey) return std::string(kMetadataKey);
  return absl::StrCat("tensor \"", Printable(key), "\"");
}

absl::Status Bad(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Subject(name), what));
}

// Walks the header as SAX events before it is built as a DOM and stops at the first thing that
// could make that DOM ambiguous or large beyond what a valid header needs: a top level that is
// not an object, a duplicate key (the DOM would keep only the last), nesting deeper than
// object > tensor > shape, an array longer than kMaxSafetensorsRank.
class StructureGuard {
 public:
  bool null() { return Value(false); }
  bool boolean(bool) { return Value(false); }
  bool number_integer(Json::number_integer_t) { return Value(false); }
  bool number_unsigned(Json::number_unsigned_t) { return Value(false); }
  bool number_float(Json::number_float_t, const std::string&) { return Value(false); }
  bool string(std::string&) { return Value(false); }
  bool binary(Json::binary_t&) { return Value(false); }
  bool start_object(std::size_t) { return Value(true) && Open(true); }
  bool start_array(std::size_t) { return Value(false) && Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& key);
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // "[json.exception.parse_error.101] parse error at ...": the bracketed id says nothing more.
    absl::string_view what = e.what();
    if (const size_t end = what.find("] "); end != absl::string_view::npos)
      what.remove_prefix(end + 2);
    return Fail(absl::StrCat("the header is not valid JSON: ", Printable(what)));
  }

  const std::string& error() const { return error_; }

 private:
  struct Level {
    bool object = false;
    int items = 0;
    absl::flat_hash_set<std::string> keys;
  };

  bool Value(bool is_object);
  bool Open(bool object);
  bool Close() {
    stack_.pop_back();
    return true;
  }
  bool Fail(std::string message) {
    error_ = std::move(message);
    return false;
  }

  std::vector<Level> stack_;
  std::string tensor_;  // the top-level key being read
  std::string error_;
};

bool StructureGuard::Value(bool is_object) {
  if (stack_.empty()) return is_object || Fail("the header is not a JSON object");
  Level& level = stack_.back();
  if (!level.object && ++level.items > kMaxSafetensorsRank) {
    return Fail(
        absl::StrCat(Subject(tensor_), ": an array of more than ", kMaxSafetensorsRank, " items"));
  }
  return true;
}

bool StructureGuard::Open(bool object) {
  if (stack_.size() == 3) return Fail(absl::StrCat(Subject(tensor_), ": nested too deeply"));
  stack_.emplace_back().object = object;
  return true;
}

bool StructureGuard::key(std::string& key) {
  if (stack_.size() == 1) tensor_ = key;
  if (stack_.back().keys.insert(key).second) return true;
  if (stack_.size() == 1) return Fail(absl::StrCat(Subject(key), " appears twice"));
  return Fail(absl::StrCat(Subject(tensor_), ": key \"", key, "\" appears twice"));
}

// A non-negative JSON integer; `what` names it in the error.
absl::StatusOr<uint64_t> NonNegative(absl::string_view name, absl::string_view what,
                                     const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return Bad(name, absl::StrCat(": ", what, " is negative"));
  return Bad(name, absl::StrCat(": ", what, " is not an integer"));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view name, const Json& v) {
  if (!v.is_array()) return Bad(name, ": shape is not an array");
  std::vector<int64_t> shape;
  for (const Json& d : v) {
    SEXTANT_ASSIGN_OR_RETURN(uint64_t dim, NonNegative(name, "a dimension of the shape", d));
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Bad(name, absl::StrCat(": shape ", v.dump(), " has a dimension too large"));
    }
    shape.push_back(static_cast<int64_t>(dim));
  }
  if (!NumElements(shape)) {
    return Bad(name, absl::StrCat(": the element count of shape ", v.dump(), " overflows"));
  }
  return shape;
}

absl::Status ParseOffsets(const Json& v, uint64_t data_size, HeaderEntry& e) {
  if (!v.is_array() || v.size() != 2) {
    return Bad(e.name, ": data_offsets is not an array [begin, end]");
  }
  SEXTANT_ASSIGN_OR_RETURN(e.begin, NonNegative(e.name, "the begin of data_offsets", v[0]));
  SEXTANT_ASSIGN_OR_RETURN(e.end, NonNegative(e.name, "the end of data_offsets", v[1]));
  if (e.begin > e.end) {
    return Bad(e.name, absl::StrCat(": data_offsets ", v.dump(), " begin after they end"));
  }
  if (e.end > data_size) {
    return Bad(e.name, absl::StrCat(": data_offsets ", v.dump(), " go past the end of the ",
                                    data_size, "-byte data buffer"));
  }
  return absl::OkStatus();
}

absl::StatusOr<HeaderEntry> ParseEntry(const std::string& name, const Json& v, uint64_t data_size) {
  if (!v.is_object()) return Bad(name, ": the entry is not an object");
  for (const auto& [key, unused] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return Bad(name, absl::StrCat(": unknown key \"", key, "\""));
    }
  }
  if (v.size() != 3) return Bad(name, ": the entry needs dtype, shape and data_offsets");
  HeaderEntry e;
  e.name = name;
  const Json& dtype = v["dtype"];
  const std::optional<DType> parsed =
      dtype.is_string() ? ParseDType(dtype.get_ref<const std::string&>()) : std::nullopt;
  if (!parsed) {
    return Bad(name, absl::StrCat(": dtype ", dtype.dump(), " is not supported (F32, F16, BF16)"));
  }
  e.dtype = *parsed;
  SEXTANT_ASSIGN_OR_RETURN(e.shape, ParseShape(name, v["shape"]));
  SEXTANT_RETURN_IF_ERROR(ParseOffsets(v["data_offsets"], data_size, e));
  // NumElements keeps count * 4 within int64, so the byte count cannot overflow.
  const uint64_t bytes = static_cast<uint64_t>(*NumElements(e.shape)) * DTypeSize(e.dtype);
  if (e.end - e.begin != bytes) {
    return Bad(name, absl::StrCat(": data_offsets [", e.begin, ",", e.end, "] hold ",
                                  e.end - e.begin, " bytes where ", DTypeName(e.dtype), " ",
                                  ShapeText(e.shape), " needs ", bytes));
  }
  return e;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const Json& v) {
  if (!v.is_object()) return Bad(kMetadataKey, " is not an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return Bad(kMetadataKey, absl::StrCat(": the value of \"", key, "\" is not a string"));
    }
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// The entries, sorted by offset, must cover [0, data_size) once: no overlap, gap or tail.
absl::Status CheckTiling(const std::vector<HeaderEntry>& entries, uint64_t data_size) {
  uint64_t pos = 0;
  const HeaderEntry* prev = nullptr;
  for (const HeaderEntry& e : entries) {
    if (e.begin < pos) {
      return Bad(e.name,
                 absl::StrCat(": data_offsets [", e.begin, ",", e.end, "] overlap ",
                              Subject(prev->name), " at [", prev->begin, ",", prev->end, "]"));
    }
    if (e.begin > pos) {
      return Bad(e.name, absl::StrCat(": data_offsets [", e.begin, ",", e.end, "] leave bytes [",
                                      pos, ",", e.begin, ") of the data buffer to no tensor"));
    }
    pos = e.end;
    prev = &e;
  }
  if (pos == data_size) return absl::OkStatus();
  if (prev == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", data_size, "-byte data buffer holds no tensor"));
  }
  return Bad(prev->name, absl::StrCat(": the last tensor ends at byte ", pos, " of the ", data_size,
                                      "-byte data buffer; the rest is no tensor's"));
}

absl::StatusOr<std::string> MetadataText(const TensorFile& file) {
  for (const auto& [key, value] : file.metadata) {
    if (!Quoted(key) || !Quoted(value)) {
      return Bad(kMetadataKey,
                 absl::StrCat(": the entry \"", Printable(key), "\" is not valid UTF-8"));
    }
  }
  return Json(file.metadata).dump();
}

// `"name":{"dtype":...,"shape":[...],"data_offsets":[offset,offset+bytes]}`, advancing offset.
absl::StatusOr<std::string> EntryText(const Tensor& t, uint64_t& offset, bool layout_only) {
  if (t.name == kMetadataKey) return Bad(t.name, " is the reserved metadata key");
  const std::optional<std::string> name = Quoted(t.name);
  if (!name) return Bad(t.name, ": the name is not valid UTF-8");
  const std::optional<int64_t> n = NumElements(t.shape);
  if (!n) return Bad(t.name, absl::StrCat(": invalid shape ", ShapeText(t.shape)));
  const uint64_t bytes = static_cast<uint64_t>(*n) * DTypeSize(t.dtype);
  if (!layout_only && t.data.size() != bytes) {
    return Bad(t.name, absl::StrCat(": ", t.data.size(), " bytes of data where ",
                                    DTypeName(t.dtype), " ", ShapeText(t.shape), " needs ", bytes));
  }
  std::string text =
      absl::StrCat(*name, ":{\"dtype\":\"", DTypeName(t.dtype), "\",\"shape\":", ShapeText(t.shape),
                   ",\"data_offsets\":[", offset, ",", offset + bytes, "]}");
  offset += bytes;
  return text;
}

}  // namespace

absl::StatusOr<Header> ParseHeader(absl::string_view json, uint64_t data_size) {
  StructureGuard guard;
  if (!Json::sax_parse(json.begin(), json.end(), &guard)) {
    return absl::InvalidArgumentError(guard.error());
  }
  const Json doc = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return absl::InvalidArgumentError("the header is not a JSON object");
  Header header;
  for (const auto& [key, value] : doc.items()) {
    if (key == kMetadataKey) {
      SEXTANT_ASSIGN_OR_RETURN(header.metadata, ParseMetadata(value));
      continue;
    }
    SEXTANT_ASSIGN_OR_RETURN(HeaderEntry e, ParseEntry(key, value, data_size));
    header.entries.push_back(std::move(e));
  }
  std::stable_sort(header.entries.begin(), header.entries.end(),
                   [](const HeaderEntry& a, const HeaderEntry& b) {
                     return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
                   });
  SEXTANT_RETURN_IF_ERROR(CheckTiling(header.entries, data_size));
  return header;
}

absl::StatusOr<std::string> BuildHeader(const TensorFile& file, bool layout_only) {
  // Written by hand rather than as a DOM, to keep the tensors in file order in linear time.
  std::string text = "{";
  if (!file.metadata.empty()) {
    SEXTANT_ASSIGN_OR_RETURN(std::string metadata, MetadataText(file));
    absl::StrAppend(&text, "\"", kMetadataKey, "\":", metadata);
  }
  absl::flat_hash_set<absl::string_view> names;
  uint64_t offset = 0;
  for (const Tensor& t : file.tensors) {
    if (!names.insert(t.name).second) return Bad(t.name, " appears twice");
    SEXTANT_ASSIGN_OR_RETURN(std::string entry, EntryText(t, offset, layout_only));
    absl::StrAppend(&text, text.size() > 1 ? "," : "", entry);
  }
  text.push_back('}');
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("the header would be ", text.size(),
                                                   " bytes, over the limit of ",
                                                   kMaxSafetensorsHeaderBytes));
  }
  return text;
}

}  // namespace sextant::internal
