// Tests for the boxed calling convention: dispatch/value.h (Value, Scalar) and the typed
// kernels that dispatch/op_table.h unboxes from a Stack (Boxed<&fn>()).
#include "dispatch/op_table.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/cpp/test_util.h"

namespace tb {
namespace {

using ::tb::testing::Contains;

Tensor CpuTensor(std::vector<float> values) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(values.size())}, DType::kFloat32);
  float* p = static_cast<float*>(t.mutable_data());
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

std::vector<float> Floats(const Tensor& t) {
  const float* p = t.data_as<const float>();
  return std::vector<float>(p, p + t.numel());
}

// ---- typed kernels -----------------------------------------------------------------------------

// out = self + alpha * other, float32, same shapes.
Tensor AddScaled(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  Tensor out = Tensor::Empty(self.shape(), DType::kFloat32);
  auto* o = static_cast<float*>(out.mutable_data());
  const float a = static_cast<float>(alpha.to_double());
  for (int64_t i = 0; i < out.numel(); ++i) {
    o[i] = self.data_as<const float>()[i] + a * other.data_as<const float>()[i];
  }
  return out;
}

int64_t CountDefined(const Tensor& self, const std::optional<Tensor>& maybe) {
  return 1 + (maybe.has_value() && maybe->defined() ? 1 : 0);
}

int64_t SumInts(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

double Mix(int64_t i, double d, bool b, const std::string& str, DType dtype) {
  return static_cast<double>(i) * 1000 + d * 100 + (b ? 10 : 0) + static_cast<double>(str.size()) +
         (dtype == DType::kFloat16 ? 0.5 : 0.0);
}

int64_t OrDefault(std::optional<int64_t> v) { return v.value_or(-1); }

std::tuple<Tensor, int64_t> WithNumel(const Tensor& t) { return {t, t.numel()}; }

int g_sunk = 0;
void Sink(const Tensor& t) { g_sunk += static_cast<int>(t.numel()); }

int64_t CountList(const std::vector<Tensor>& ts) { return static_cast<int64_t>(ts.size()); }

TEST(BoxedTest, UnboxesAFreeFunction) {
  OpTable table;
  auto h = table.RegisterKernel("test::add_scaled", DeviceType::kCPU, Boxed<&AddScaled>(), "t");
  Tensor a = CpuTensor({1, 2, 3}), b = CpuTensor({10, 20, 30});
  Stack s{a, b, 2.0};
  table.Call("test::add_scaled", s);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_TRUE(s[0].is_tensor());
  EXPECT_EQ(Floats(s[0].to_tensor()), (std::vector<float>{21, 42, 63}));

  Stack si{a, b, 3};  // int Scalar
  table.Call("test::add_scaled", si);
  EXPECT_EQ(Floats(si[0].to_tensor()), (std::vector<float>{31, 62, 93}));
  Stack sb{a, b, true};  // bool Scalar
  table.Call("test::add_scaled", sb);
  EXPECT_EQ(Floats(sb[0].to_tensor()), (std::vector<float>{11, 22, 33}));
  Stack ss{a, b, Scalar(0.5)};
  table.Call("test::add_scaled", ss);
  EXPECT_EQ(Floats(ss[0].to_tensor()), (std::vector<float>{6, 12, 18}));
}

TEST(BoxedTest, WrongArgumentTypeNamesOpAndIndex) {
  OpTable table;
  auto h = table.RegisterKernel("test::add_scaled", DeviceType::kCPU, Boxed<&AddScaled>(), "t");
  Tensor a = CpuTensor({1}), b = CpuTensor({2});
  Stack s1{a, 3, 2.0};
  std::string m1 =
      EXPECT_TB_ERROR(kTypeError, "test::add_scaled: argument 1 expected Tensor but got int",
                      table.Call("test::add_scaled", s1));
  EXPECT_EQ(m1, "test::add_scaled: argument 1 expected Tensor but got int");
  Stack s0{std::nullopt, b, 2.0};
  std::string m0 =
      EXPECT_TB_ERROR(kTypeError, "test::add_scaled: argument 0 expected Tensor but got None",
                      table.Call("test::add_scaled", s0));
  EXPECT_EQ(m0, "test::add_scaled: argument 0 expected Tensor but got None");
  Stack s2{a, b, "two"};
  std::string m2 =
      EXPECT_TB_ERROR(kTypeError, "test::add_scaled: argument 2 expected Scalar but got str",
                      table.Call("test::add_scaled", s2));
  EXPECT_EQ(m2, "test::add_scaled: argument 2 expected Scalar but got str");
  Stack s3{a, b, a};
  std::string m3 =
      EXPECT_TB_ERROR(kTypeError, "test::add_scaled: argument 2 expected Scalar but got Tensor",
                      table.Call("test::add_scaled", s3));
  EXPECT_EQ(m3, "test::add_scaled: argument 2 expected Scalar but got Tensor");
}

TEST(BoxedTest, WrongArityIsATypeError) {
  OpTable table;
  auto h = table.RegisterKernel("test::add_scaled", DeviceType::kCPU, Boxed<&AddScaled>(), "t");
  Tensor a = CpuTensor({1});
  Stack two{a, a};
  std::string m = EXPECT_TB_ERROR(kTypeError, "test::add_scaled: expected 3 arguments, got 2",
                                  table.Call("test::add_scaled", two));
  EXPECT_EQ(m, "test::add_scaled: expected 3 arguments, got 2");
  Stack four{a, a, 1, 1};
  m = EXPECT_TB_ERROR(kTypeError, "test::add_scaled: expected 3 arguments, got 4",
                      table.Call("test::add_scaled", four));
  EXPECT_EQ(m, "test::add_scaled: expected 3 arguments, got 4");
  Stack none;
  EXPECT_TB_ERROR(kTypeError, "test::add_scaled: expected 3 arguments, got 0",
                  table.Call("test::add_scaled", none));
}

TEST(BoxedTest, OptionalTensorAcceptsNone) {
  OpTable table;
  auto h = table.RegisterKernel("test::count", DeviceType::kCPU, Boxed<&CountDefined>(), "t");
  Tensor t = CpuTensor({1});
  Stack with_none{t, std::nullopt};
  table.Call("test::count", with_none);
  ASSERT_EQ(with_none.size(), 1u);
  EXPECT_EQ(with_none[0].to_int(), 1);
  Stack with_empty_optional{t, std::optional<Tensor>()};
  table.Call("test::count", with_empty_optional);
  EXPECT_EQ(with_empty_optional[0].to_int(), 1);
  Stack with_tensor{t, std::optional<Tensor>(t)};
  table.Call("test::count", with_tensor);
  EXPECT_EQ(with_tensor[0].to_int(), 2);
  Stack with_int{t, 5};
  std::string m = EXPECT_TB_ERROR(kTypeError, "test::count: argument 1 expected Tensor but got int",
                                  table.Call("test::count", with_int));
  EXPECT_EQ(m, "test::count: argument 1 expected Tensor but got int");
}

TEST(BoxedTest, IntListAcceptsASingleInt) {
  OpTable table;
  auto h = table.RegisterKernel("test::sum", DeviceType::kCPU, Boxed<&SumInts>(), "t");
  Stack list{std::vector<int64_t>{1, 2, 3}};
  table.Call("test::sum", list);
  EXPECT_EQ(list[0].to_int(), 6);
  Stack single{4};
  table.Call("test::sum", single);
  EXPECT_EQ(single[0].to_int(), 4);
  Stack empty{std::vector<int64_t>{}};
  table.Call("test::sum", empty);
  EXPECT_EQ(empty[0].to_int(), 0);
  Stack bad{2.5};
  std::string m = EXPECT_TB_ERROR(kTypeError, "test::sum: argument 0 expected int[] but got float",
                                  table.Call("test::sum", bad));
  EXPECT_EQ(m, "test::sum: argument 0 expected int[] but got float");
  Stack doubles{std::vector<double>{1.0}};
  m = EXPECT_TB_ERROR(kTypeError, "test::sum: argument 0 expected int[] but got float[]",
                      table.Call("test::sum", doubles));
  EXPECT_EQ(m, "test::sum: argument 0 expected int[] but got float[]");
}

TEST(BoxedTest, ScalarArgumentConversions) {
  OpTable table;
  auto h = table.RegisterKernel("test::mix", DeviceType::kCPU, Boxed<&Mix>(), "t");
  Stack s{int64_t{2}, 3, false, "abcd", DType::kFloat16};  // int -> double is accepted
  table.Call("test::mix", s);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_TRUE(s[0].is_double());
  EXPECT_DOUBLE_EQ(s[0].to_double(), 2304.5);
  Stack b{true, 0.25, true, "", DType::kFloat32};  // bool -> int is accepted
  table.Call("test::mix", b);
  EXPECT_DOUBLE_EQ(b[0].to_double(), 1035.0);
  Stack bad_bool{1, 1.0, 1, "", DType::kFloat32};
  std::string m = EXPECT_TB_ERROR(kTypeError, "test::mix: argument 2 expected bool but got int",
                                  table.Call("test::mix", bad_bool));
  EXPECT_EQ(m, "test::mix: argument 2 expected bool but got int");
  Stack bad_int{1.5, 1.0, true, "", DType::kFloat32};
  m = EXPECT_TB_ERROR(kTypeError, "test::mix: argument 0 expected int but got float",
                      table.Call("test::mix", bad_int));
  EXPECT_EQ(m, "test::mix: argument 0 expected int but got float");
  Stack bad_str{1, 1.0, true, 7, DType::kFloat32};
  m = EXPECT_TB_ERROR(kTypeError, "test::mix: argument 3 expected str but got int",
                      table.Call("test::mix", bad_str));
  EXPECT_EQ(m, "test::mix: argument 3 expected str but got int");
  Stack bad_dtype{1, 1.0, true, "", 7};
  m = EXPECT_TB_ERROR(kTypeError, "test::mix: argument 4 expected ScalarType but got int",
                      table.Call("test::mix", bad_dtype));
  EXPECT_EQ(m, "test::mix: argument 4 expected ScalarType but got int");
  Stack bad_double{1, "x", true, "", DType::kFloat32};
  m = EXPECT_TB_ERROR(kTypeError, "test::mix: argument 1 expected float but got str",
                      table.Call("test::mix", bad_double));
  EXPECT_EQ(m, "test::mix: argument 1 expected float but got str");
}

TEST(BoxedTest, OptionalScalarsTuplesVoidAndLists) {
  OpTable table;
  auto h1 = table.RegisterKernel("test::or_default", DeviceType::kCPU, Boxed<&OrDefault>(), "t");
  auto h2 = table.RegisterKernel("test::with_numel", DeviceType::kCPU, Boxed<&WithNumel>(), "t");
  auto h3 = table.RegisterKernel("test::sink", DeviceType::kCPU, Boxed<&Sink>(), "t");
  auto h4 = table.RegisterKernel("test::count_list", DeviceType::kCPU, Boxed<&CountList>(), "t");

  Stack none{std::nullopt};
  table.Call("test::or_default", none);
  EXPECT_EQ(none[0].to_int(), -1);
  Stack seven{7};
  table.Call("test::or_default", seven);
  EXPECT_EQ(seven[0].to_int(), 7);

  Tensor t = CpuTensor({1, 2, 3});
  Stack tuple{t};
  table.Call("test::with_numel", tuple);
  ASSERT_EQ(tuple.size(), 2u);
  EXPECT_EQ(tuple[0].to_tensor().data(), t.data());
  EXPECT_EQ(tuple[1].to_int(), 3);

  g_sunk = 0;
  Stack sink{t};
  table.Call("test::sink", sink);
  EXPECT_TRUE(sink.empty());
  EXPECT_EQ(g_sunk, 3);

  Stack list{std::vector<Tensor>{t, t}};
  table.Call("test::count_list", list);
  EXPECT_EQ(list[0].to_int(), 2);
  Stack not_list{t};
  std::string m =
      EXPECT_TB_ERROR(kTypeError, "test::count_list: argument 0 expected Tensor[] but got Tensor",
                      table.Call("test::count_list", not_list));
  EXPECT_EQ(m, "test::count_list: argument 0 expected Tensor[] but got Tensor");
}

TEST(ValueTest, TagsAndTypeNames) {
  EXPECT_STREQ(Value().type_name(), "None");
  EXPECT_TRUE(Value(std::nullopt).is_none());
  EXPECT_STREQ(Value(true).type_name(), "bool");
  EXPECT_STREQ(Value(3).type_name(), "int");
  EXPECT_STREQ(Value(int64_t{3}).type_name(), "int");
  EXPECT_STREQ(Value(1.5).type_name(), "float");
  EXPECT_STREQ(Value(CpuTensor({1})).type_name(), "Tensor");
  EXPECT_STREQ(Value(std::optional<Tensor>()).type_name(), "None");
  EXPECT_STREQ(Value(std::vector<Tensor>{}).type_name(), "Tensor[]");
  EXPECT_STREQ(Value(std::vector<std::optional<Tensor>>{}).type_name(), "Tensor?[]");
  EXPECT_STREQ(Value(std::vector<int64_t>{1}).type_name(), "int[]");
  EXPECT_STREQ(Value(std::vector<double>{1}).type_name(), "float[]");
  EXPECT_STREQ(Value(std::vector<bool>{true}).type_name(), "bool[]");
  EXPECT_STREQ(Value("s").type_name(), "str");
  EXPECT_STREQ(Value(DType::kFloat32).type_name(), "ScalarType");
  EXPECT_STREQ(Value(Device{}).type_name(), "Device");

  EXPECT_TRUE(Value(Scalar(true)).is_bool());
  EXPECT_TRUE(Value(Scalar(int64_t{4})).is_int());
  EXPECT_EQ(Value(Scalar(4)).to_int(), 4);
  EXPECT_TRUE(Value(Scalar(2.5)).is_double());
  EXPECT_DOUBLE_EQ(Value(4).to_double(), 4.0);
  EXPECT_TRUE(Value(false).to_scalar().is_bool());
  EXPECT_EQ(Value(7).to_scalar().to_int(), 7);
  EXPECT_DOUBLE_EQ(Value(0.75).to_scalar().to_double(), 0.75);
  EXPECT_EQ(Scalar(2.9).to_int(), 2);
  EXPECT_TRUE(Scalar().is_integral());
}

}  // namespace
}  // namespace tb
