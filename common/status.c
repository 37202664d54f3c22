#include "status.h"

#include <errno.h>

const char *ivm_status_string(int status)
{
    switch (status) {
#define IVM_STATUS_TEXT_CASE(name, value, text) case value: return text;
    IVM_STATUS_TABLE(IVM_STATUS_TEXT_CASE)
#undef IVM_STATUS_TEXT_CASE
    default:
        return "unknown status";
    }
}

const char *ivm_status_name(int status)
{
    switch (status) {
#define IVM_STATUS_NAME_CASE(name, value, text) case value: return #name;
    IVM_STATUS_TABLE(IVM_STATUS_NAME_CASE)
#undef IVM_STATUS_NAME_CASE
    default:
        return "?";
    }
}

ivmError_t ivm_status_from_errno(int err)
{
    switch (err) {
    case 0:
        return IVM_SUCCESS;
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
        return IVM_ERROR_NO_MEMORY;
    case EACCES:
    case EPERM:
        return IVM_ERROR_PERMISSION;
    case ENOENT:
    case ESRCH:
        return IVM_ERROR_NOT_FOUND;
    case EEXIST:
        return IVM_ERROR_EXISTS;
    case EINVAL:
    case E2BIG:
    case ENAMETOOLONG:
        return IVM_ERROR_INVALID_VALUE;
    case ETIMEDOUT:
        return IVM_ERROR_TIMEOUT;
    case ECONNREFUSED:
        return IVM_ERROR_NO_DAEMON;
    case EPIPE:
    case ECONNRESET:
        return IVM_ERROR_DAEMON_LOST;
    case ENOSYS:
    case EOPNOTSUPP:
        return IVM_ERROR_UNSUPPORTED;
    default:
        return IVM_ERROR_INTERNAL;
    }
}
