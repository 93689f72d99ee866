// swift-tools-version:6.0
import PackageDescription
#if canImport(Glibc)
import Glibc
#endif

/// True when this machine's glibc loads RELR relocations (2.36 and later; Debian 12 has 2.36).
/// The binary is built where it runs: it links the system's libcurl, libyaml and SQLite.
let hostGlibcLoadsRELR: Bool = {
    #if canImport(Glibc)
    var buffer = [UInt8](repeating: 0, count: 64)
    let length = buffer.withUnsafeMutableBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { confstr(Int32(_CS_GNU_LIBC_VERSION), $0.baseAddress, $0.count) }
    }
    guard length > 1, length <= buffer.count else { return false }
    // "glibc 2.36"
    let text = String(decoding: buffer[..<(length - 1)], as: UTF8.self)
    let version = text.split(separator: " ").last?.split(separator: ".").compactMap { Int($0) } ?? []
    return version.count >= 2 && (version[0], version[1]) >= (2, 36)
    #else
    return false
    #endif
}()

// Module split (SPEC §1): the template engine imports nothing of ours; the configuration module
// owns YAML loading, diagnostics and request building; the CLI is thin. C libraries get their own
// system-library target and only one Swift module sees each.
let package = Package(
    name: "pushreporter",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "pushreporter", targets: ["pushreporter"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "PushTemplates",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]
        ),
        // Threads, blocking calls off Swift's pool, the allocator, processors and files: what the
        // other modules need of the system; imports nothing of ours.
        .target(name: "PushSystem"),
        .target(
            name: "PushConfig",
            dependencies: [
                "CYAML",
                "PushSystem",
                "PushTemplates",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The scheduler imports nothing of ours: a pure retry state machine and a clock-generic shell.
        // Its bodies go into the module interface in release builds, so that the agent specializes
        // them for its key and clock: unspecialized, looking up generic type metadata at run time
        // was 4-7 % of the CPU of run --once (perf, 100k).
        .target(
            name: "PushScheduler",
            dependencies: [.product(name: "HeapModule", package: "swift-collections")],
            swiftSettings: [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]
        ),
        // HTTP over libcurl's multi interface; the only module that sees CCurl.
        .target(
            name: "PushTransport",
            dependencies: ["CCurl"]
        ),
        // State (SPEC §6, §11) on SQLite or PostgreSQL; the only module that sees CSQLite and CPostgres.
        .target(
            name: "PushState",
            dependencies: ["CSQLite", "CPostgres"]
        ),
        // The contract every backend fulfils (SPEC §9.0): what a backend renders, how its
        // requests are sent and judged. Backends import it, never each other.
        .target(
            name: "PushBackend",
            dependencies: ["PushConfig", "PushSystem", "PushTemplates", "PushScheduler", "PushTransport", "PushState",
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
        ),
        // The Acrobits web services (SPEC §2–§5, §9.1).
        .target(
            name: "PushAcrobits",
            dependencies: [
                "PushBackend", "PushSystem", "PushConfig", "PushTemplates", "PushScheduler", "PushTransport",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Microsoft Customer Insights – Journeys device registration (SPEC §9.2).
        .target(
            name: "PushJourneys",
            dependencies: [
                "PushBackend", "PushSystem", "PushConfig", "PushTemplates", "PushScheduler", "PushTransport",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Firebase Cloud Messaging device groups (SPEC §9.3), with OAuth 2 service-account tokens.
        .target(
            name: "PushFCM",
            dependencies: [
                "PushBackend", "PushConfig", "PushTemplates", "PushScheduler", "PushTransport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // Adobe Campaign Standard push tracking and test payloads (SPEC §9.4): `track`, the
        // agent's tracking spool (a Service of its own) and `payload`.
        .target(
            name: "PushAdobe",
            dependencies: [
                "PushBackend", "PushSystem", "PushConfig", "PushTemplates", "PushScheduler", "PushTransport", "PushCommandKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The registry's one list: every backend of this build (docs/adding-a-backend.md).
        .target(
            name: "PushRegistry",
            dependencies: ["PushBackend", "PushAcrobits", "PushAdobe", "PushFCM", "PushJourneys", "PushSystem", "PushCommandKit"]
        ),
        // Composition: configuration → backends → scheduler → transport, with state and logging.
        .target(
            name: "PushAgent",
            dependencies: [
                "PushBackend",
                "PushSystem",
                "PushListener",
                "PushConfig",
                "PushTemplates",
                "PushScheduler",
                "PushTransport",
                "PushState",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // What the commands share (options, loading, exit codes, the request formats), and what
        // a backend's own commands build on; names no backend.
        .target(
            name: "PushCommandKit",
            dependencies: [
                "PushAgent", "PushBackend", "PushConfig", "PushState", "PushSystem", "PushTemplates", "PushTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // HTTP/1.1 requests parsed and responses written, for the agent's endpoint (SPEC §9.5) and
        // the test servers; imports only PushSystem (its threads).
        .target(name: "PushListener", dependencies: ["PushSystem"]),
        .target(
            // What the tests share: fake receivers, transports, backends and ledgers, a kill
            // harness, clocks and processes (the agent in process: PushAgentTesting).
            name: "PushTestSupport",
            dependencies: [
                "PushBackend",
                "PushConfig",
                "PushListener",
                "PushState",
                "PushTransport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // A backend made up for docs/adding-a-backend.md: not in the registry's list, the tests
        // register it beside the others with one line, as a new backend would be.
        .target(name: "PushExampleWebhook", dependencies: ["PushBackend", "PushConfig", "PushTemplates", "PushTransport"]),
        // The long-running agent in the tests' own process, as `run` assembles it (AgentHarness).
        .target(
            name: "PushAgentTesting",
            dependencies: ["PushAgent", "PushBackend", "PushCommandKit", "PushConfig", "PushState", "PushTestSupport", "PushTestThreads",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")]
        ),
        // Blocks SIGHUP, SIGTERM and SIGINT in a constructor that runs before the Swift runtime
        // starts (SPEC §12); only the executable links it.
        .target(name: "CEarlySignals"),
        .executableTarget(
            name: "pushreporter",
            dependencies: [
                "CEarlySignals",
                "PushAgent",
                "PushSystem",
                "PushCommandKit",
                "PushRegistry",
                "PushBackend",
                "PushConfig",
                "PushScheduler",
                "PushState",
                "PushTemplates",
                "PushTransport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            linkerSettings: [
                // The shipped build is linked for a small resident size (bench/README.md, part d):
                // lld packs its relative relocations (RELR) where glibc can load them, as gold's
                // 2 MB table of them was read in full at every start; and the 11,000 Swift symbols
                // the static stdlib's flags export (-export-dynamic) stay private, as nothing
                // looks them up.
                .unsafeFlags(["-use-ld=lld", "-Xlinker", "--no-export-dynamic"]
                             + (hostGlibcLoadsRELR ? ["-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"] : []),
                             .when(platforms: [.linux], configuration: .release)),
            ]
        ),
        // Threads of the tests' own for in-process async tests (the `.ownThreads` trait).
        .target(name: "PushTestThreads"),
        // The demo receiver of `make run`: prints what it is sent (built on the test-support server).
        .executableTarget(name: "pushreporter-receiver", dependencies: ["PushTestSupport"], path: "Sources/PushReceiver"),
        // Benchmark and fuzzing tools (bench/README.md, fuzz/README.md); not part of the product.
        .executableTarget(name: "pushreporter-bench", dependencies: ["PushTemplates"], path: "Sources/PushBench"),
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzTemplate", dependencies: ["FuzzSupport", "PushTemplates"]),
        .executableTarget(name: "FuzzLoader", dependencies: ["FuzzSupport", "PushConfig", "PushAcrobits"]),
        .executableTarget(name: "FuzzHTTP", dependencies: ["FuzzSupport", "PushListener"]),
        .testTarget(
            name: "PushListenerTests",
            dependencies: ["PushListener", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushSystemTests",
            dependencies: ["PushSystem", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushTemplatesTests",
            dependencies: ["PushTemplates", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushConfigTests",
            dependencies: ["PushConfig", "PushRegistry", "PushSystem", "PushAcrobits", "PushAdobe", "PushAgent", "PushBackend", "PushJourneys", "PushFCM",
                           "PushState", "PushTemplates", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushJourneysTests",
            dependencies: ["PushJourneys", "PushBackend", "PushConfig", "PushScheduler", "PushTransport", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushFCMTests",
            dependencies: [
                "PushFCM", "PushBackend", "PushConfig", "PushScheduler", "PushTransport", "PushTestSupport", "PushTestThreads",
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "PushAdobeTests",
            dependencies: ["PushAdobe", "PushBackend", "PushConfig", "PushScheduler", "PushTransport", "PushTestSupport", "PushTestThreads",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
        ),
        .testTarget(
            name: "PushAcrobitsTests",
            dependencies: ["PushAcrobits", "PushBackend", "PushConfig", "PushTemplates", "PushScheduler", "PushState", "PushTransport", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushSchedulerTests",
            dependencies: ["PushScheduler", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushTransportTests",
            dependencies: ["PushTransport", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushStateTests",
            dependencies: ["PushState", "PushTestSupport", "PushTestThreads"]
        ),
        .testTarget(
            name: "PushAgentTests",
            dependencies: ["PushAgent", "PushAgentTesting", "PushCommandKit", "PushExampleWebhook", "PushRegistry", "PushAcrobits", "PushBackend",
                           "PushConfig", "PushScheduler", "PushState", "PushTransport", "PushTestSupport",
                           "PushTestThreads", .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
        ),
        .testTarget(
            name: "PushReporterTests",
            dependencies: ["PushState", "PushTestSupport", "PushTestThreads", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "_CryptoExtras", package: "swift-crypto")]
        ),
    ]
)

// A file uses only the modules it imports: a method of a module visible only through another one
// (corelibs Foundation through a package that imports it, say) is a compile error, not a silent
// link of that module. `make bench` checks the shipped binary has no corelibs Foundation in it.
for target in package.targets where target.type == .regular || target.type == .executable {
    target.swiftSettings = (target.swiftSettings ?? []) + [.enableUpcomingFeature("MemberImportVisibility")]
}
