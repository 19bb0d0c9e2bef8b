import NetplayLAN

extension LanBeaconCodec {
    /// The registry room id of a beacon's room: `lan:` and the beacon id (cut to 60 bytes).
    public static func roomId(beaconId: String) -> String {
        "lan:" + String(decoding: RetroArchAdvertisement.truncated(beaconId, to: 60), as: UTF8.self)
    }
}
