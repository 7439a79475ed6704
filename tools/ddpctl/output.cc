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
    if (code < kMinimum[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
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

std::string KeyValueText(const v1::KeyValue& kv, bool with_value) {
  if (!with_value) return PrintableBytes(kv.key());
  return absl::StrCat(PrintableBytes(kv.key()), " = ", PrintableBytes(kv.value()));
}

std::string EventText(const v1::Event& event) {
  if (event.type() == v1::Event::DELETE) {
    return absl::StrCat("DELETE ", PrintableBytes(event.kv().key()), " (revision ",
                        event.kv().mod_revision(), ")");
  }
  return absl::StrCat("PUT ", KeyValueText(event.kv()), " (revision ", event.kv().mod_revision(),
                      ")");
}

}  // namespace ddp::ddpctl
