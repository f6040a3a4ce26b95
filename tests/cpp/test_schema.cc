// Tests for dispatch/schema.h: parsing torch's schema text, binding calls against it, and the
// embedded table of ATen schemas.
#include "dispatch/schema.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace tb {
namespace {

TEST(SchemaTest, ParsesArgumentsReturnsAndKeywordOnlyMarker) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(s.name().ToString(), "aten::add.Tensor");
  ASSERT_EQ(s.arguments().size(), 3u);
  EXPECT_EQ(s.arguments()[0].name, "self");
  EXPECT_EQ(s.arguments()[0].type.kind, TypeKind::kTensor);
  EXPECT_FALSE(s.arguments()[1].kwarg_only);
  const Argument& alpha = s.arguments()[2];
  EXPECT_EQ(alpha.type.kind, TypeKind::kScalar);
  EXPECT_TRUE(alpha.kwarg_only);
  ASSERT_TRUE(alpha.default_text.has_value());
  EXPECT_EQ(*alpha.default_text, "1");
  ASSERT_TRUE(alpha.default_value.has_value());
  EXPECT_TRUE(alpha.default_value->is_int());
  EXPECT_EQ(alpha.default_value->to_int(), 1);
  ASSERT_EQ(s.returns().size(), 1u);
  EXPECT_EQ(s.returns()[0].type.kind, TypeKind::kTensor);
  EXPECT_FALSE(s.is_mutable());
}

TEST(SchemaTest, ToStringGivesTorchsTextBack) {
  for (const char* text :
       {"aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
        "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor "
        "indices)",
        "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
        "dtype=None) -> Tensor"}) {
    EXPECT_EQ(FunctionSchema::Parse(text).ToString(), text);
  }
}

TEST(SchemaTest, ListOptionalAndAliasTypes) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool "
      "accumulate=False) -> Tensor(a!)");
  EXPECT_TRUE(s.is_mutable());
  const ArgType& self = s.arguments()[0].type;
  EXPECT_TRUE(self.is_write);
  EXPECT_EQ(self.text, "Tensor(a!)");
  const ArgType& indices = s.arguments()[1].type;
  EXPECT_TRUE(indices.list);
  EXPECT_TRUE(indices.element_optional);
  EXPECT_FALSE(indices.optional);

  FunctionSchema pool = FunctionSchema::Parse(
      "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> "
      "Tensor");
  const Argument& kernel = pool.arguments()[1];
  EXPECT_EQ(kernel.type.kind, TypeKind::kInt);
  EXPECT_TRUE(kernel.type.list);
  EXPECT_EQ(kernel.type.list_size, 2);
  // "int[2] padding=0": the default is the number repeated to the list's length.
  const Argument& padding = pool.arguments()[3];
  ASSERT_TRUE(padding.default_value.has_value());
  EXPECT_EQ(padding.default_value->to_int_list(), (std::vector<int64_t>{0, 0}));
  const Argument& stride = pool.arguments()[2];
  EXPECT_TRUE(stride.default_value->to_int_list().empty());
}

TEST(SchemaTest, MalformedTextIsAValueError) {
  EXPECT_TB_ERROR(kValueError, "malformed schema", FunctionSchema::Parse("aten::relu"));
  EXPECT_TB_ERROR(kValueError, "more than one '='",
                  FunctionSchema::Parse("aten::f(int a=1=2) -> Tensor"));
}

TEST(SchemaBindTest, FillsDefaultsAndTakesKeywords) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? "
      "dtype=None) -> Tensor");
  Tensor x = Tensor::Empty({2, 3}, DType::kFloat32);
  Stack bound = s.Bind({x, int64_t{1}}, {{"dtype", Value(DType::kFloat64)}});
  ASSERT_EQ(bound.size(), 4u);
  EXPECT_TRUE(bound[0].is_tensor());
  // An int for int[1]? becomes a one-element list.
  EXPECT_EQ(bound[1].to_int_list(), (std::vector<int64_t>{1}));
  EXPECT_TRUE(bound[2].is_bool());
  EXPECT_FALSE(bound[2].to_bool());
  EXPECT_EQ(bound[3].to_dtype(), DType::kFloat64);
}

TEST(SchemaBindTest, NumbersForTensorsAreWrapped) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  Tensor x = Tensor::Empty({2}, DType::kFloat32);
  Stack bound = s.Bind({x, 2.5}, {});
  ASSERT_TRUE(bound[1].is_tensor());
  const Tensor& other = bound[1].to_tensor();
  EXPECT_TRUE(other.is_wrapped_number());
  EXPECT_EQ(other.ndim(), 0);
  EXPECT_EQ(other.dtype(), DType::kFloat64);
  EXPECT_EQ(*other.data_as<double>(), 2.5);
  EXPECT_EQ(bound[2].to_int(), 1);  // alpha's default
}

TEST(SchemaBindTest, BadCallsNameTheOpAndTheArgument) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  Tensor x = Tensor::Empty({2}, DType::kFloat32);
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: takes 2 positional arguments but 3 were given",
                  s.Bind({x, x, int64_t{1}}, {}));
  EXPECT_TB_ERROR(kTypeError, "aten::add.Tensor: missing required argument 'other' (Tensor)",
                  s.Bind({x}, {}));
  EXPECT_TB_ERROR(kTypeError, "got multiple values for argument 'other'",
                  s.Bind({x, x}, {{"other", Value(x)}}));
  EXPECT_TB_ERROR(kTypeError, "got an unexpected keyword argument 'beta'",
                  s.Bind({x, x}, {{"beta", Value(int64_t{2})}}));
  EXPECT_TB_ERROR(kTypeError, "argument 'alpha' must be Scalar, not",
                  s.Bind({x, x}, {{"alpha", Value("two")}}));
  EXPECT_TB_ERROR(kTypeError, "argument 'self' must be Tensor, not", s.Bind({Value("x"), x}, {}));
}

TEST(SchemaBindTest, CheckArgumentNormalisesOneValue) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0) -> "
      "Tensor");
  EXPECT_EQ(s.CheckArgument(1, int64_t{3}).to_int_list(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(s.CheckArgument(1, std::vector<int64_t>{3}).to_int_list(),
            (std::vector<int64_t>{3, 3}));
  EXPECT_TB_ERROR(kTypeError, "aten::max_pool2d: takes 4 arguments, not 5",
                  s.CheckArgument(4, int64_t{1}));
}

TEST(SchemaBindTest, DevicesOtherThanTheCpuAreRefused) {
  FunctionSchema s = FunctionSchema::Parse(
      "aten::zeros(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? "
      "device=None, bool? pin_memory=None) -> Tensor");
  Stack ok = s.Bind({std::vector<int64_t>{2}}, {{"device", Value("cpu")}});
  EXPECT_EQ(ok[3].tag(), Value::Tag::kDevice);
  EXPECT_TB_ERROR(kNotImplementedError, "aten::zeros: argument 'device': device 'cuda'",
                  s.Bind({std::vector<int64_t>{2}}, {{"device", Value("cuda")}}));
}

TEST(AtenSchemaTest, TheEmbeddedTableHoldsTorchsSchemas) {
  const FunctionSchema* add = FindAtenSchema("aten::add.Tensor");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->ToString(),
            "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(FindAtenSchema("aten::add.Tensor"), add);  // parsed once
  EXPECT_EQ(FindAtenSchema("aten::no_such_op"), nullptr);
  bool found_add = false, add_is_core = false;
  std::vector<std::pair<std::string, bool>> names = AtenSchemaNames();
  EXPECT_GT(names.size(), 1000u);
  for (const auto& [name, core] : names) {
    if (name == "aten::add.Tensor") {
      found_add = true;
      add_is_core = core;
    }
  }
  EXPECT_TRUE(found_add);
  EXPECT_TRUE(add_is_core);
}

}  // namespace
}  // namespace tb
