import Foundation
@testable import PushConfig
import PushTestSupport
import Testing
import PushTestThreads

/// The thread that reads a load's files ahead ends with the load, whatever the load took.
@Suite(.blockingThreads) struct FileReaderTests {
    /// How many threads of this process are called `name` (as `top -H` shows them).
    static func threads(named name: String) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.count { task in
            (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .newlines) == name
        }
    }

    @Test func aLoadThatStopsEarlyLeavesNoThreadAndNothingReadBehind() throws {
        let directory = TemporaryDirectory()
        let paths = (0..<5).map { directory.write("f\($0).yaml", "accounts:\n  - username: u\($0)\n") }
        // A name of this test's own: other tests load configurations in this process meanwhile.
        let name = "pushrep-rd-t1"
        let reader = FileReader(paths: paths, ahead: 2, threadName: name)
        guard case .success = reader.take(0).contents else {
            Issue.record("the first file was not read")
            return
        }
        // The reader is two files ahead and waits for the loader, which stops here.
        #expect(Self.threads(named: name) == 1)
        reader.finish()
        #expect(Self.threads(named: name) == 0, "finish() waits for the reading thread to end")
    }

    @Test func aWholeLoadEndsItsReadingThreadBeforeItReturns() throws {
        let directory = TemporaryDirectory()
        let paths = (0..<3).map { directory.write("f\($0).yaml", "agent: {timeout: 5x, concurrency: 0}\naccounts:\n  - username: u\($0)\n") }
        var loader = ConfigurationLoader(environment: LoaderEnvironment())
        loader.readAhead = 2
        loader.readerThreadName = "pushrep-rd-t2"
        let result = loader.load(paths: paths)
        #expect(result.diagnostics.hasErrors, "the agent: block is invalid")
        #expect(Self.threads(named: "pushrep-rd-t2") == 0, "no reading thread outlives the load")
    }
}
