import Foundation
import PushTestSupport
import PushTestThreads
import Testing

/// docs/architecture.md draws the modules in layers, each importing only from the layers below
/// it: the picture is checked against what every source file imports.
@Suite(.blockingThreads) struct ArchitectureDocTests {
    /// Module → layer, from the first fenced block of docs/architecture.md.
    static func layers() throws -> [String: Int] {
        let block = try #require(try DocsTests.blocks("", in: "docs/architecture.md").first)
        var layers: [String: Int] = [:]
        var layer = -1
        for line in block.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            var names = words
            if let first = words.first, let number = Int(first) {
                layer = number
                names.removeFirst()
            }
            // The modules come first on a line, before what they hold.
            for name in names {
                guard name.hasPrefix("Push") || name.hasPrefix("C") && name.count > 1 && name.dropFirst().first!.isUppercase
                        || name == "pushreporter" else { break }
                layers[name] = layer
            }
        }
        return layers
    }

    /// The modules of ours each module's sources import.
    static func imports(of module: String) throws -> Set<String> {
        let directory = RepositoryPaths.root + "/Sources/" + module
        var found = Set<String>()
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory).filter { $0.hasSuffix(".swift") }
        for file in files {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                guard let index = words.firstIndex(of: "import"), index + 1 < words.count,
                      words[..<index].allSatisfy({ $0.hasPrefix("@") }) else { continue }
                found.insert(String(words[index + 1]))
            }
        }
        return found
    }

    @Test func everyModuleImportsOnlyFromTheLayersBelowIt() throws {
        let layers = try Self.layers()
        #expect(layers.count >= 17, "\(layers)")
        for (module, layer) in layers where FileManager.default.fileExists(atPath: RepositoryPaths.root + "/Sources/" + module) {
            for imported in try Self.imports(of: module) {
                guard let below = layers[imported] else { continue }
                #expect(below < layer, "\(module) (layer \(layer)) imports \(imported) (layer \(below))")
            }
        }
    }

    @Test func everyProductModuleIsInThePicture() throws {
        let layers = try Self.layers()
        let modules = try FileManager.default.contentsOfDirectory(atPath: RepositoryPaths.root + "/Sources")
        // Tools and test support are not part of the product.
        let notProduct: Set<String> = ["PushTestSupport", "PushTestThreads", "PushAgentTesting", "PushExampleWebhook", "PushReceiver",
                                       "PushBench", "FuzzSupport", "FuzzTemplate", "FuzzLoader", "FuzzHTTP", "CEarlySignals"]
        for module in modules where !notProduct.contains(module) {
            #expect(layers[module] != nil, "\(module) is not in docs/architecture.md")
        }
    }
}
