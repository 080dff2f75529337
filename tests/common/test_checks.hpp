// Helpers shared by the host layout tests and the GPU tests.
#pragma once

#include <aijpredict/csr.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace aijp::test {

/// The same matrix with values converted to T.
template <typename T>
csr_matrix<T> cast(const csr_matrix<double>& a)
{
  return value_cast<T>(a);
}

/// |got - want| <= bound entry by entry (NaN fails); reports at most five entries.
template <typename T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::vector<double>& bound,
                  const std::string& what)
{
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    if (!(err <= bound[i]) && reported++ < 5) {
      ADD_FAILURE() << what << ": entry " << i << " got " << got[i] << " want " << want[i] << " bound " << bound[i];
    }
  }
}

}  // namespace aijp::test
