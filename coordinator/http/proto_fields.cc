#include "coordinator/http/proto_fields.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace ddp::http {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

const FieldDescriptor* FindField(const google::protobuf::Descriptor& type, absl::string_view name) {
  const FieldDescriptor* field = type.FindFieldByName(std::string(name));
  if (field == nullptr) {
    for (int i = 0; i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == name) return type.field(i);
    }
  }
  return field;
}

absl::Status BadValue(const FieldDescriptor& field, absl::string_view value,
                      absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("parameter '", field.name(), "' of ",
                                                 field.containing_type()->full_name(), ": '", value,
                                                 "' is not ", expected));
}

template <typename T>
absl::StatusOr<T> ParseNumber(const FieldDescriptor& field, absl::string_view value,
                              absl::string_view expected) {
  T parsed;
  if (!absl::SimpleAtoi(value, &parsed)) return BadValue(field, value, expected);
  return parsed;
}

absl::Status SetScalar(Message& message, const FieldDescriptor& field, absl::string_view value) {
  const auto* reflection = message.GetReflection();
  const bool repeated = field.is_repeated();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string text(value);
      repeated ? reflection->AddString(&message, &field, text)
               : reflection->SetString(&message, &field, text);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      auto v = ParseNumber<int32_t>(field, value, "a 32-bit integer");
      if (!v.ok()) return v.status();
      repeated ? reflection->AddInt32(&message, &field, *v)
               : reflection->SetInt32(&message, &field, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      auto v = ParseNumber<int64_t>(field, value, "a 64-bit integer");
      if (!v.ok()) return v.status();
      repeated ? reflection->AddInt64(&message, &field, *v)
               : reflection->SetInt64(&message, &field, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      auto v = ParseNumber<uint32_t>(field, value, "an unsigned 32-bit integer");
      if (!v.ok()) return v.status();
      repeated ? reflection->AddUInt32(&message, &field, *v)
               : reflection->SetUInt32(&message, &field, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      auto v = ParseNumber<uint64_t>(field, value, "an unsigned 64-bit integer");
      if (!v.ok()) return v.status();
      repeated ? reflection->AddUInt64(&message, &field, *v)
               : reflection->SetUInt64(&message, &field, *v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(value, &v)) return BadValue(field, value, "true or false");
      repeated ? reflection->AddBool(&message, &field, v)
               : reflection->SetBool(&message, &field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v;
      if (!absl::SimpleAtod(value, &v)) return BadValue(field, value, "a number");
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
        repeated ? reflection->AddFloat(&message, &field, static_cast<float>(v))
                 : reflection->SetFloat(&message, &field, static_cast<float>(v));
      } else {
        repeated ? reflection->AddDouble(&message, &field, v)
                 : reflection->SetDouble(&message, &field, v);
      }
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* type = field.enum_type();
      const auto* enum_value = type->FindValueByName(std::string(value));
      int number;
      if (enum_value == nullptr && absl::SimpleAtoi(value, &number)) {
        enum_value = type->FindValueByNumber(number);
      }
      if (enum_value == nullptr) {
        return BadValue(field, value, absl::StrCat("a value of ", type->full_name()));
      }
      repeated ? reflection->AddEnum(&message, &field, enum_value)
               : reflection->SetEnum(&message, &field, enum_value);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("parameter '", field.name(), "' of ",
                                                 field.containing_type()->full_name(),
                                                 " is a message; send it in the JSON body"));
}

}  // namespace

absl::Status SetFieldFromText(Message& message, absl::string_view field_path,
                              absl::string_view value) {
  std::vector<absl::string_view> names = absl::StrSplit(field_path, '.');
  Message* target = &message;
  for (size_t i = 0; i < names.size(); ++i) {
    const FieldDescriptor* field = FindField(*target->GetDescriptor(), names[i]);
    if (field == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown parameter '", field_path, "' for ",
                                                     message.GetDescriptor()->full_name()));
    }
    if (i + 1 == names.size()) return SetScalar(*target, *field, value);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", field_path, "' for ",
                                                     message.GetDescriptor()->full_name(), ": '",
                                                     names[i], "' has no fields"));
    }
    target = target->GetReflection()->MutableMessage(target, field);
  }
  return absl::OkStatus();
}

}  // namespace ddp::http
