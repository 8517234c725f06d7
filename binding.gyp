{
  "targets": [
    {
      "target_name": "proclease",
      "sources": ["native/addon.cc", "native/file_jobs.cc", "native/files_posix.cc", "native/lock_posix.cc", "native/procargs.cc", "native/reap_posix.cc", "native/snapshot_index.cc", "native/thread_clock_posix.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS", "NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
      "cflags_cc": ["-std=c++17", "-fno-exceptions", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "conditions": [
        ["OS=='linux'", {
          "sources": ["native/facts_linux.cc", "native/inspect_linux.cc", "native/procfs_linux.cc", "native/pidfd_linux.cc", "native/exec_guard_linux.cc", "native/attach_linux.cc"]
        }],
        ["OS=='linux'", {"sources": ["native/beneath_jobs.cc", "native/beneath_posix.cc"]}],
        ["OS=='mac'", {"sources": ["native/beneath_jobs.cc", "native/beneath_posix.cc"]}],
        ["OS=='mac'", {
          "sources": ["native/facts_darwin.cc"],
          "xcode_settings": {
            "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
            "GCC_ENABLE_CPP_EXCEPTIONS": "NO",
            "MACOSX_DEPLOYMENT_TARGET": "10.15"
          }
        }]
      ]
    },
    {
      "target_name": "proclease-wrapper",
      "conditions": [
        ["OS=='linux'", {
          "type": "executable",
          "sources": ["native/wrapper_linux.c", "native/wrapper_sweep_linux.c", "native/wrapper_cgroup_linux.c", "native/wrapper_relay_linux.c", "native/wrapper_journal_linux.c", "native/wrapper_attach_linux.c", "native/wrapper_record_linux.c"],
          "cflags": ["-O2", "-Wall", "-Wextra"]
        }, {
          "type": "none"
        }]
      ]
    },
    {
      "target_name": "proclease-terminal-holder",
      "conditions": [
        ["OS=='linux'", {
          "type": "executable",
          "sources": ["native/terminal_holder_linux.c"],
          "cflags": ["-O2", "-Wall", "-Wextra"]
        }, {
          "type": "none"
        }]
      ]
    }
  ]
}
