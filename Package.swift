// swift-tools-version:6.0
import PackageDescription

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
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CYAML",
            pkgConfig: "yaml-0.1",
            providers: [.apt(["libyaml-dev"])]
        ),
        .target(
            name: "PushTemplates",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")]
        ),
        .target(
            name: "PushConfig",
            dependencies: [
                "CYAML",
                "PushTemplates",
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(
            name: "PushTestSupport",
            dependencies: []
        ),
        .executableTarget(
            name: "pushreporter",
            dependencies: [
                "PushConfig",
                "PushTemplates",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Benchmark and fuzzing tools (bench/README.md, fuzz/README.md); not part of the product.
        .executableTarget(name: "pushreporter-bench", dependencies: ["PushTemplates"], path: "Sources/PushBench"),
        .target(name: "FuzzSupport"),
        .executableTarget(name: "FuzzTemplate", dependencies: ["FuzzSupport", "PushTemplates"]),
        .executableTarget(name: "FuzzLoader", dependencies: ["FuzzSupport", "PushConfig"]),
        .testTarget(
            name: "PushTemplatesTests",
            dependencies: ["PushTemplates", "PushTestSupport"]
        ),
        .testTarget(
            name: "PushConfigTests",
            dependencies: ["PushConfig", "PushTemplates", "PushTestSupport"]
        ),
        .testTarget(
            name: "PushReporterTests",
            dependencies: ["PushTestSupport"]
        ),
    ]
)
