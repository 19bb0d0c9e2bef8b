import CNetplayAPI

// The first release's `_init` functions, which its header called directly (they are macros over
// `..._init_sized` now): kept for frontends built against that header, filling the first
// version's size.

@_cdecl("np_client_config_init")
public func np_client_config_init(_ config: UnsafeMutablePointer<np_client_config>?) {
    np_client_config_init_sized(config, StructVersions.clientConfig[0])
}

@_cdecl("np_host_settings_init")
public func np_host_settings_init(_ settings: UnsafeMutablePointer<np_host_settings>?) {
    np_host_settings_init_sized(settings, StructVersions.hostSettings[0])
}
