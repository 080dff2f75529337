/*
   aijpredict: a PETSc matrix type whose MatMult picks its own GPU storage format.

   Use it without recompiling:   -dll_append <prefix>/lib/libaijpredict.so -mat_type aijpredict
   or link libaijpredict and call MatAIJPredictInitializePackage() after PetscInitialize().
*/
#pragma once

#include <petscmat.h>

#define MATAIJPREDICT    "aijpredict"
#define MATSEQAIJPREDICT "seqaijpredict"
#define MATMPIAIJPREDICT "mpiaijpredict"

/* Registers the matrix types, the log events and the options; called by PetscDLLibraryRegister_aijpredict(). */
PETSC_EXTERN PetscErrorCode MatAIJPredictInitializePackage(void);
PETSC_EXTERN PetscErrorCode PetscDLLibraryRegister_aijpredict(void);

PETSC_EXTERN PetscErrorCode MatCreateSeqAIJPredict(MPI_Comm, PetscInt, PetscInt, PetscInt, const PetscInt[], Mat *);
/* The storage format the matrix runs MatMult in ("cusparse_csr", "sell", or "cpu" for the SeqAIJ fallback). */
PETSC_EXTERN PetscErrorCode MatAIJPredictGetFormat(Mat, const char **);
/* The decision report (statistics, prediction per format, choice); NULL before the first MatMult. */
PETSC_EXTERN PetscErrorCode MatAIJPredictGetReport(Mat, const char **);
