#ifndef PUSHREPORTER_EARLY_SIGNALS_H
#define PUSHREPORTER_EARLY_SIGNALS_H

/// Whether SIGHUP, SIGTERM and SIGINT were blocked by the constructor that runs before main()
/// and before the Swift runtime starts (SPEC §12). Referencing it also keeps that constructor
/// in the executable.
int pushreporter_early_signals_blocked(void);

#endif
