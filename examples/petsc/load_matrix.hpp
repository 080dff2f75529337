// The examples' input matrix: a Matrix Market file, or a generator spec when no file is given (host CSR).
#pragma once

#include <petscsys.h>

#include <aijpredict/generators.hpp>
#include <aijpredict/matrix_market.hpp>

#include <string>

static inline PetscErrorCode LoadMatrix(const std::string &file, const std::string &spec, aijp::csr_matrix<double> *a)
{
  PetscFunctionBegin;
  try {
    *a = file.empty() ? aijp::gen::from_spec(spec) : aijp::io::read_matrix_market(file);
  } catch (const std::exception &e) {
    SETERRQ(PETSC_COMM_WORLD, PETSC_ERR_FILE_UNEXPECTED, "%s", e.what());
  }
  PetscFunctionReturn(PETSC_SUCCESS);
}
