import PushCommandKit
import CEarlySignals
#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP (reload), SIGTERM and SIGINT (stop): blocked before anything else runs (SPEC §12), so
/// that one arriving in the first milliseconds after exec stays pending instead of ending the
/// process with the default action. A function in the executable's `.preinit_array` blocks them
/// before any shared library is initialized (`Sources/CEarlySignals`): blocked first thing in
/// `main()`, a SIGHUP sent up to 8 ms after exec ended the release binary, while libpq's,
/// libcurl's and the Swift runtime's initializers ran.
///
/// The long-running agent keeps them blocked in every thread (threads inherit the mask): its
/// handlers are swift-service-lifecycle's `UnixSignalsSequence`s, which libdispatch serves on
/// Linux from a `signalfd`, and a `signalfd` reads blocked signals, those that were already
/// pending when it was made included. So a SIGHUP that came while loading asks for a reload once
/// the agent runs, and a SIGTERM stops it gracefully then. Every other command unblocks them
/// once the command line is parsed: it installs no handler, and SIGINT or SIGTERM must end it as
/// they end any program (one already pending does so at once).
enum AgentSignals {
    static func block() {
        // Already done by the constructor; asked, so that the linker keeps it.
        if pushreporter_early_signals_blocked() == 0 { change(SIG_BLOCK) }
    }

    static func unblock() {
        change(SIG_UNBLOCK)
    }

    private static func change(_ how: Int32) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGHUP, SIGTERM, SIGINT] { sigaddset(&set, signal) }
        pthread_sigmask(how, &set, nil)
    }
}
