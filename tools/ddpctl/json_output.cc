#include "tools/ddpctl/json_output.h"

#include <cmath>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/proto_json.h"
#include "google/protobuf/descriptor.h"
#include "tools/ddpctl/output.h"

namespace ddp::ddpctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string DoubleJson(double value) {
  if (std::isnan(value)) return "\"NaN\"";
  if (std::isinf(value)) return value > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return absl::StrFormat("%.17g", value);
}

void AppendMessage(const Message& message, std::string& out);

// One value of `field` (element `index` when repeated, else -1). Bytes are
// written as text or base64 by the caller's `base64` choice.
void AppendValue(const Message& message, const FieldDescriptor* field, int index, bool base64,
                 std::string& out) {
  const Reflection* r = message.GetReflection();
  const bool rep = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedInt32(message, field, index) : r->GetInt32(message, field));
      return;
    case FieldDescriptor::CPPTYPE_INT64:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedInt64(message, field, index) : r->GetInt64(message, field));
      return;
    case FieldDescriptor::CPPTYPE_UINT32:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedUInt32(message, field, index) : r->GetUInt32(message, field));
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedUInt64(message, field, index) : r->GetUInt64(message, field));
      return;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      out += DoubleJson(rep ? r->GetRepeatedDouble(message, field, index)
                            : r->GetDouble(message, field));
      return;
    case FieldDescriptor::CPPTYPE_FLOAT:
      out += DoubleJson(rep ? r->GetRepeatedFloat(message, field, index)
                            : r->GetFloat(message, field));
      return;
    case FieldDescriptor::CPPTYPE_BOOL:
      out += (rep ? r->GetRepeatedBool(message, field, index) : r->GetBool(message, field))
                 ? "true"
                 : "false";
      return;
    case FieldDescriptor::CPPTYPE_ENUM: {
      const google::protobuf::EnumValueDescriptor* value =
          rep ? r->GetRepeatedEnum(message, field, index) : r->GetEnum(message, field);
      out += JsonQuote(value->name());
      return;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string value =
          rep ? r->GetRepeatedString(message, field, index) : r->GetString(message, field);
      if (field->type() == FieldDescriptor::TYPE_BYTES && base64) {
        out += JsonQuote(absl::Base64Escape(value));
      } else {
        out += JsonQuote(value);
      }
      return;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Message& value =
          rep ? r->GetRepeatedMessage(message, field, index) : r->GetMessage(message, field);
      AppendMessage(value, out);
      return;
    }
  }
}

// Whether a bytes field (every element when repeated) is printed as base64.
bool NeedsBase64(const Message& message, const FieldDescriptor* field) {
  if (field->type() != FieldDescriptor::TYPE_BYTES) return false;
  const Reflection* r = message.GetReflection();
  if (!field->is_repeated()) return !IsValidUtf8(r->GetString(message, field));
  for (int i = 0; i < r->FieldSize(message, field); ++i) {
    if (!IsValidUtf8(r->GetRepeatedString(message, field, i))) return true;
  }
  return false;
}

void AppendMap(const Message& message, const FieldDescriptor* field, std::string& out) {
  const Reflection* r = message.GetReflection();
  const FieldDescriptor* key = field->message_type()->map_key();
  const FieldDescriptor* value = field->message_type()->map_value();
  out += "{";
  for (int i = 0; i < r->FieldSize(message, field); ++i) {
    const Message& entry = r->GetRepeatedMessage(message, field, i);
    if (i > 0) out += ",";
    std::string key_text;
    AppendValue(entry, key, -1, false, key_text);
    // JSON object keys are strings; integer and bool keys get quoted.
    out += key_text.front() == '"' ? key_text : JsonQuote(key_text);
    out += ":";
    AppendValue(entry, value, -1, NeedsBase64(entry, value), out);
  }
  out += "}";
}

void AppendMessage(const Message& message, std::string& out) {
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  // Timestamp, Duration and the other well-known types have their own JSON
  // forms (an RFC 3339 string, "1.5s", ...): protobuf's mapping prints them.
  if (absl::StartsWith(descriptor->full_name(), "google.protobuf.")) {
    out += ProtoJson(message);
    return;
  }
  const Reflection* r = message.GetReflection();
  out += "{";
  bool first = true;
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    // As protobuf's mapping with every primitive field printed: fields with
    // presence (messages, oneof members, proto3 optional) only when set.
    if (!field->is_repeated() && field->has_presence() && !r->HasField(message, field)) continue;
    if (!first) out += ",";
    first = false;
    out += JsonQuote(field->json_name());
    out += ":";
    if (field->is_map()) {
      AppendMap(message, field, out);
      continue;
    }
    const bool base64 = NeedsBase64(message, field);
    if (field->is_repeated()) {
      out += "[";
      for (int k = 0; k < r->FieldSize(message, field); ++k) {
        if (k > 0) out += ",";
        AppendValue(message, field, k, base64, out);
      }
      out += "]";
    } else {
      AppendValue(message, field, -1, base64, out);
    }
    if (base64)
      absl::StrAppend(&out, ",", JsonQuote(field->json_name() + "Encoding"), ":\"base64\"");
  }
  out += "}";
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const unsigned char byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          absl::StrAppendFormat(&out, "\\u%04x", byte);
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

std::string CliJson(const google::protobuf::Message& message) {
  std::string out;
  AppendMessage(message, out);
  return out;
}

}  // namespace ddp::ddpctl
