/* Status texts, generated from IVM_STATUS_TABLE in ivm.h. */
#ifndef IVM_COMMON_STATUS_H
#define IVM_COMMON_STATUS_H

#include "ivm.h"

/* Text of a status code; "unknown status" for values outside the table. */
const char *ivm_status_string(int status);

/* Name of a status code ("IVM_ERROR_NOT_FOUND"); "?" if unknown. */
const char *ivm_status_name(int status);

/* Translate an errno value into the closest IVM status. */
ivmError_t ivm_status_from_errno(int err);

#endif /* IVM_COMMON_STATUS_H */
