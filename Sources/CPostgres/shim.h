#ifndef PUSHREPORTER_CPOSTGRES_SHIM_H
#define PUSHREPORTER_CPOSTGRES_SHIM_H
#include <libpq-fe.h>
#endif
