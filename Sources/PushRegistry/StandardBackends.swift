import PushSystem
import PushAcrobits
import PushAdobe
import PushBackend
import PushFCM
import PushJourneys

extension Backends {
    /// Every backend of this build: the registry's one list. A backend plugs in with one line
    /// here (and its module in Package.swift): `type:` is checked against it, and everything
    /// the agent and the commands do with backends goes through it (docs/adding-a-backend.md).
    public static let standard = Backends([
        AcrobitsBackend(),
        JourneysBackend(),
        FCMBackend(wallClock: WallClock.epochMilliseconds),
        AdobeBackend(),
    ])
}
