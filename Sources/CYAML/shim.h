#ifndef PUSHREPORTER_CYAML_SHIM_H
#define PUSHREPORTER_CYAML_SHIM_H
#include <yaml.h>
#endif
