#include <signal.h>
#include "EarlySignals.h"

// SPEC §12: SIGHUP, SIGTERM and SIGINT are blocked before anything else runs, so that one that
// arrives in the first milliseconds after exec stays pending instead of ending the process with
// its default action. Swift code runs only once the shared libraries' initializers (libpq's,
// libcurl's and the TLS and Kerberos libraries under them) and the Swift runtime have run: a
// SIGHUP sent up to 8 ms after exec ended the release binary. A function in the executable's
// .preinit_array runs before any shared library is initialized, right after the dynamic loader
// has mapped and relocated them. AgentSignals decides what to unblock once the command line is
// parsed.
static int blocked = 0;

static void pushreporter_block_early_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    blocked = sigprocmask(SIG_BLOCK, &set, 0) == 0;
}

__attribute__((section(".preinit_array"), used))
static void (*const pushreporter_early_signals_entry)(void) = pushreporter_block_early_signals;

int pushreporter_early_signals_blocked(void) {
    return blocked;
}
