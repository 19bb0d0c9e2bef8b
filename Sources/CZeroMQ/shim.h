#ifndef NETPLAY_CZEROMQ_SHIM_H
#define NETPLAY_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
#endif
