// Tests for dispatch/op_name.h.
#include "dispatch/op_name.h"

#include <gtest/gtest.h>

#include <string>

#include "bridge/error.h"

namespace tb {
namespace {

ErrorKind KindOf(const std::string& qualified) {
  try {
    OpName::Parse(qualified);
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "OpName::Parse(\"" << qualified << "\") did not throw";
  return ErrorKind::kInternalError;
}

TEST(OpNameTest, ParsesNameAndOverload) {
  OpName add = OpName::Parse("aten::add.Tensor");
  EXPECT_EQ(add.name, "aten::add");
  EXPECT_EQ(add.overload, "Tensor");
  EXPECT_EQ(add.ToString(), "aten::add.Tensor");

  OpName out = OpName::Parse("aten::add.out");
  EXPECT_EQ(out.name, "aten::add");
  EXPECT_EQ(out.overload, "out");

  OpName custom = OpName::Parse("my_ns::fused_op.float_variant");
  EXPECT_EQ(custom.name, "my_ns::fused_op");
  EXPECT_EQ(custom.overload, "float_variant");
}

TEST(OpNameTest, DefaultOverload) {
  OpName gelu = OpName::Parse("aten::gelu");
  EXPECT_EQ(gelu.name, "aten::gelu");
  EXPECT_TRUE(gelu.overload.empty());
  EXPECT_EQ(gelu.ToString(), "aten::gelu");

  OpName spelled = OpName::Parse("aten::gelu.default");
  EXPECT_EQ(spelled.name, "aten::gelu");
  EXPECT_TRUE(spelled.overload.empty());
  EXPECT_EQ(spelled.ToString(), "aten::gelu");
  EXPECT_TRUE(spelled == gelu);
  EXPECT_FALSE(OpName::Parse("aten::gelu.tanh") == gelu);
}

TEST(OpNameTest, OnlyTheFirstDotAfterTheNamespaceSplits) {
  // Dots inside the namespace are part of it.
  OpName ns = OpName::Parse("my.lib::op.overload");
  EXPECT_EQ(ns.name, "my.lib::op");
  EXPECT_EQ(ns.overload, "overload");
  OpName two = OpName::Parse("aten::op.a.b");
  EXPECT_EQ(two.name, "aten::op");
  EXPECT_EQ(two.overload, "a.b");
}

TEST(OpNameTest, NamesWithoutNamespaceAreValueErrors) {
  EXPECT_EQ(KindOf("add"), ErrorKind::kValueError);
  EXPECT_EQ(KindOf("add.Tensor"), ErrorKind::kValueError);
  EXPECT_EQ(KindOf(""), ErrorKind::kValueError);
  EXPECT_EQ(KindOf("::add"), ErrorKind::kValueError);
  EXPECT_EQ(KindOf("aten::"), ErrorKind::kValueError);
  EXPECT_EQ(KindOf("aten:add"), ErrorKind::kValueError);
  try {
    OpName::Parse("relu");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("'relu'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("aten::add.Tensor"), std::string::npos) << e.message();
  }
}

// An operator needs a name after its namespace; "aten::.Tensor" names no operator (it
// parses today as name "aten::" with overload "Tensor"), and "aten::add." has an empty
// overload after its dot.
TEST(OpNameTest, EmptyOperatorOrOverloadNamesAreValueErrors) {
  EXPECT_EQ(KindOf("aten::.Tensor"), ErrorKind::kValueError);
  EXPECT_EQ(KindOf("aten::add."), ErrorKind::kValueError);
}

}  // namespace
}  // namespace tb
