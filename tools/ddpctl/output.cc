#include "tools/ddpctl/output.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace ddp::ddpctl {

bool IsValidUtf8(absl::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char lead = static_cast<unsigned char>(bytes[i]);
    int extra = 0;
    uint32_t code = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      extra = 1;
      code = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      extra = 2;
      code = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      extra = 3;
      code = lead & 0x07;
    } else {
      return false;
    }
    if (i + extra >= bytes.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10FFFF ||
        (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string PrintableBytes(absl::string_view bytes) {
  bool plain = IsValidUtf8(bytes);
  for (char c : bytes) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) plain = false;
  }
  if (plain) return std::string(bytes);
  return absl::StrCat("\"", absl::CHexEscape(bytes), "\"");
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (char c : text) {
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
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

void JsonObject::Name(absl::string_view name) {
  if (!body_.empty()) body_ += ",";
  absl::StrAppend(&body_, JsonQuote(name), ":");
}

JsonObject& JsonObject::Int(absl::string_view name, int64_t value) {
  Name(name);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonObject& JsonObject::Bool(absl::string_view name, bool value) {
  Name(name);
  absl::StrAppend(&body_, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::String(absl::string_view name,
                               absl::string_view value) {
  Name(name);
  absl::StrAppend(&body_, JsonQuote(value));
  return *this;
}

JsonObject& JsonObject::Bytes(absl::string_view name, absl::string_view value) {
  if (IsValidUtf8(value)) return String(name, value);
  return String(absl::StrCat(name, "_base64"), absl::Base64Escape(value));
}

JsonObject& JsonObject::Raw(absl::string_view name, absl::string_view json) {
  Name(name);
  absl::StrAppend(&body_, json);
  return *this;
}

std::string KeyValueJson(const v1::KeyValue& kv, bool with_value) {
  JsonObject object;
  object.Bytes("key", kv.key());
  if (with_value) object.Bytes("value", kv.value());
  object.Int("create_revision", kv.create_revision())
      .Int("mod_revision", kv.mod_revision())
      .Int("version", kv.version())
      .Int("lease", kv.lease());
  return object.Build();
}

std::string KeyValueText(const v1::KeyValue& kv, bool with_value) {
  if (!with_value) return PrintableBytes(kv.key());
  return absl::StrCat(PrintableBytes(kv.key()), " = ",
                      PrintableBytes(kv.value()));
}

std::string EventText(const v1::Event& event) {
  if (event.type() == v1::Event::DELETE) {
    return absl::StrCat("DELETE ", PrintableBytes(event.kv().key()),
                        " (revision ", event.kv().mod_revision(), ")");
  }
  return absl::StrCat("PUT ", KeyValueText(event.kv()), " (revision ",
                      event.kv().mod_revision(), ")");
}

std::string EventJson(const v1::Event& event) {
  const bool is_delete = event.type() == v1::Event::DELETE;
  return JsonObject()
      .String("type", is_delete ? "DELETE" : "PUT")
      .Raw("kv", KeyValueJson(event.kv(), !is_delete))
      .Build();
}

}  // namespace ddp::ddpctl
