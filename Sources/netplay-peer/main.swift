import NetplayService
import PeerCommand

// `netplay-peer`: the headless client; its commands live in PeerCommand.
NetplayPeer.main()
