# End-to-end NFS test tooling: a harness that runs throwaway ganesha.nfsd
# instances (ctest/fsal/ganesha_harness.c), an NFSv4.2 xattr client of our
# own (ctest/fsal/nfs42_xattr.c, because Debian's libnfs 4.0 has no
# NFSv4.1/4.2), a CLI over it (nfs_xattr_tool), and the xattr tests, run
# against the stock FSAL_VFS and FSAL_MEM (which answer NOTSUPP), against
# test shims that give those two xattrs (reference servers), and against
# FSAL_NGNFS on a formatted blockd cluster (ctest/fsal/ngnfs_backend.c).
# Everything but the last works without our plugin.
#
#   fsal-tools.nfs42_decode
#       the NFSv4.2 client against a scripted fake server sending truncated
#       results, hostile lengths and counts, a wrong xid or slot sequence,
#       a 2 GiB record mark, a connection closed mid-reply, a 129-byte file
#       handle: each must be a clean error (no crash, no over-read: ASan).
#   fsal-tools.ganesha_harness
#       the harness itself: a started instance serves its export, a start
#       whose export fails (unknown FSAL) is a failed start within its bound,
#       two instances run side by side, stop leaves no process or folder;
#       Squash = No_Root_Squash keeps root root, a libnfs ?uid=1000&gid=1000
#       credential is refused write to a root 0644 file and owns what it
#       creates (checked on disk), Root_Squash maps root to anonymous.
#   fsal-tools.nfs42_xattr_vfs_unsupported
#   fsal-tools.nfs42_xattr_mem_unsupported
#       ganesha 4.3's VFS and MEM FSALs do not implement NFSv4.2 xattrs
#       (only FSAL_CEPH does), so these prove the session setup, that
#       ganesha decodes every xattr request we encode (it answers
#       NFS4ERR_NOTSUPP, not BADXDR), exact error statuses (NOENT), a
#       session surviving failed ops, four concurrent clients each with its
#       own client owner, and that nfs_xattr_tool exits 1 naming the status.
#   fsal-tools.nfs42_xattr_memxattr_functional  (only with NGNFS_BUILD_FSAL=ON)
#       the functional xattr tests against ganesha's FSAL_MEM with the
#       test-only xattr support of ctest/fsal/memxattr/mem_xattr.c, and
#       nfs_xattr_tool's set/get/list/remove and exit statuses.
#   fsal-tools.nfs42_xattr_vfsxattr_functional  (only with NGNFS_BUILD_FSAL=ON)
#       the same against the stock FSAL_VFS with the test shim
#       ctest/fsal/vfsxattr/vfs_xattr.c (user.* xattrs on the exported
#       files), plus: an xattr set over NFS is seen by getxattr(2) on the
#       exported folder, one set by setxattr(2) there is read over NFS.
#   fsal-tools.nfs42_xattr_ngnfs_functional  (only with NGNFS_BUILD_FSAL=ON)
#       the same against FSAL_NGNFS on a formatted one-device blockd
#       cluster (names of at most 250 bytes, see below).
#
# The same program runs the functional xattr tests (set, get, CREATE on an
# existing name -> NFS4ERR_EXIST, REPLACE on a missing one ->
# NFS4ERR_NOXATTR, remove, list with cookie paging, largest value, 255-byte
# name) with --expect supported, e.g. for FSAL_NGNFS:
#   test_nfs42_xattr --expect supported --plugins-dir <dir of libfsalngnfs.so>
#       --ngnfs-devices 1 --max-value-size 8191 [--tool <nfs_xattr_tool>]
# (--ngnfs-devices starts and formats blockd and fills @DEVICES@ in the
# FSAL block, default 'FSAL { Name = NGNFS; Devices = "@DEVICES@"; }';
# ganesha 4.3 itself refuses xattr values over 8191 bytes, so 64 KiB
# cannot pass through it with any FSAL; add --local-xattrs for an FSAL
# that keeps a local folder's user.* xattrs.)
if(NOT LIBNFS_FOUND)
	message(STATUS "ctest/fsal-tools.cmake: libnfs not found; NFS tool tests skipped")
	return()
endif()

add_library(ngnfs_nfs_test_tools STATIC ${NGNFS_TEST_DIR}/fsal/ganesha_harness.c
	    ${NGNFS_TEST_DIR}/fsal/nfs42_xattr.c)
target_include_directories(ngnfs_nfs_test_tools PUBLIC ${NGNFS_TEST_DIR}/fsal)

# Only what runs FSAL_NGNFS links this: a formatted blockd cluster.
add_library(ngnfs_nfs_ngnfs_backend STATIC ${NGNFS_TEST_DIR}/fsal/ngnfs_backend.c)
target_link_libraries(ngnfs_nfs_ngnfs_backend PUBLIC ngnfs_nfs_test_tools ngnfs_test_harness)

add_executable(nfs_xattr_tool ${NGNFS_TEST_DIR}/fsal/nfs_xattr_tool.c)
target_link_libraries(nfs_xattr_tool PRIVATE ngnfs_nfs_test_tools)

add_executable(test_ganesha_harness ${NGNFS_TEST_DIR}/fsal/test_ganesha_harness.c)
target_link_libraries(test_ganesha_harness PRIVATE ngnfs_nfs_test_tools PkgConfig::CMOCKA
		      PkgConfig::LIBNFS)

add_executable(test_nfs42_xattr ${NGNFS_TEST_DIR}/fsal/test_nfs42_xattr.c)
add_dependencies(test_nfs42_xattr nfs_xattr_tool)
target_link_libraries(test_nfs42_xattr PRIVATE ngnfs_nfs_ngnfs_backend PkgConfig::CMOCKA
		      PkgConfig::LIBNFS)

# The client's decoder against a scripted fake server (no ganesha needed).
add_executable(test_nfs42_decode ${NGNFS_TEST_DIR}/fsal/test_nfs42_decode.c)
target_link_libraries(test_nfs42_decode PRIVATE ngnfs_nfs_test_tools PkgConfig::CMOCKA
		      Threads::Threads)
add_test(NAME fsal-tools.nfs42_decode COMMAND test_nfs42_decode)
set_tests_properties(fsal-tools.nfs42_decode PROPERTIES TIMEOUT 30 LABELS fsal-tools)

find_program(NGNFS_GANESHA_NFSD ganesha.nfsd PATHS /usr/bin /usr/sbin)
# Environment of every test here: the daemon, and (for sanitizer builds)
# the suppression of libnfs 4.0's leak of client names.
set(nfs_tools_environment "NGNFS_GANESHA=${NGNFS_GANESHA_NFSD}"
    "LSAN_OPTIONS=suppressions=${NGNFS_TEST_DIR}/fsal/lsan-libnfs.supp:print_suppressions=0")
if(NOT NGNFS_GANESHA_NFSD)
	message(STATUS "ctest/fsal-tools.cmake: ganesha.nfsd not found; NFS tool tests skipped")
	return()
endif()

# A reference server for the functional xattr tests: ganesha's own FSAL_MEM,
# compiled from the source package the FSAL build fetches, plus
# ctest/fsal/memxattr/mem_xattr.c (xattrs in memory, wired in with
# --wrap=mem_handle_ops_init), as a test copy of libfsalmem.so in its own
# folder.  Needs the ganesha source and config.h generator of
# fsal_ngnfs/CMakeLists.txt, so it exists only when NGNFS_BUILD_FSAL is ON.
file(GLOB memxattr_ganesha_main "${NGNFS_GANESHA_CACHE}/nfs-ganesha-*/src/FSAL/FSAL_MEM/mem_main.c")
if(COMMAND ngnfs_ganesha_config_h AND TARGET fsalngnfs AND memxattr_ganesha_main)
	list(GET memxattr_ganesha_main 0 memxattr_ganesha_main)
	get_filename_component(memxattr_mem_dir ${memxattr_ganesha_main} DIRECTORY)
	get_filename_component(GANESHA_SOURCE_DIR ${memxattr_mem_dir}/../../.. ABSOLUTE)
	set(memxattr_plugin_dir ${CMAKE_CURRENT_BINARY_DIR}/memxattr-plugin)
	ngnfs_ganesha_config_h(${CMAKE_CURRENT_BINARY_DIR}/memxattr-include)
	set(memxattr_ganesha_sources ${memxattr_mem_dir}/mem_main.c
	    ${memxattr_mem_dir}/mem_export.c ${memxattr_mem_dir}/mem_handle.c
	    ${memxattr_mem_dir}/mem_up.c)
	# Third-party code compiled as is: its warnings are not ours to fix.
	set_source_files_properties(${memxattr_ganesha_sources} PROPERTIES COMPILE_OPTIONS -w)
	add_library(fsalmem_xattr_test MODULE ${memxattr_ganesha_sources}
		    ${NGNFS_TEST_DIR}/fsal/memxattr/mem_xattr.c)
	set_target_properties(fsalmem_xattr_test PROPERTIES OUTPUT_NAME fsalmem
			      LIBRARY_OUTPUT_DIRECTORY ${memxattr_plugin_dir})
	target_compile_definitions(fsalmem_xattr_test PRIVATE _GNU_SOURCE __USE_GNU
				   _LARGEFILE64_SOURCE _FILE_OFFSET_BITS=64 HAS_DOFF NDEBUG)
	target_include_directories(fsalmem_xattr_test SYSTEM PRIVATE
				   ${CMAKE_CURRENT_BINARY_DIR}/memxattr-include
				   ${GANESHA_SOURCE_DIR}/src/include
				   ${GANESHA_SOURCE_DIR}/src/include/os/linux
				   ${GANESHA_SOURCE_DIR}/src/FSAL
				   ${GANESHA_SOURCE_DIR}/src/FSAL/Stackable_FSALs/FSAL_MDCACHE
				   ${memxattr_mem_dir} /usr/include/ntirpc)
	# Loaded into the stock, uninstrumented daemon: no sanitizers.
	target_compile_options(fsalmem_xattr_test PRIVATE -fno-strict-aliasing -fno-sanitize=all)
	target_link_options(fsalmem_xattr_test PRIVATE -fno-sanitize=all -Wl,--no-undefined
			    -Wl,--wrap=mem_handle_ops_init)
	target_link_libraries(fsalmem_xattr_test PRIVATE /usr/lib/ganesha/libganesha_nfsd.so.4.3)
	add_dependencies(test_nfs42_xattr fsalmem_xattr_test)

	# The functional tests: set/get, CREATE/REPLACE, missing names, remove,
	# largest value, one byte more refused, 255-byte name, LISTXATTRS
	# paging with cookies.  8191 bytes is the largest value ganesha 4.3's
	# XDR decoder takes (XDR_STRING_MAXLEN - 1), whatever the FSAL.
	add_test(NAME fsal-tools.nfs42_xattr_memxattr_functional
		 COMMAND test_nfs42_xattr --expect supported --plugins-dir ${memxattr_plugin_dir}
			 --fsal-block "FSAL { Name = MEM; }" --max-value-size 8191
			 --tool $<TARGET_FILE:nfs_xattr_tool>)
	set_tests_properties(fsal-tools.nfs42_xattr_memxattr_functional PROPERTIES
			     TIMEOUT 60 LABELS fsal-tools
			     ENVIRONMENT "${nfs_tools_environment}")

	# The same tests against the stock FSAL_VFS with xattrs kept as the
	# exported file's user.* xattrs (ctest/fsal/vfsxattr/vfs_xattr.c, a
	# shim libfsalvfs.so over Debian's), plus --local-xattrs: what NFS sets
	# getxattr(2) sees on the exported folder and the other way round.
	# Sizes fit the local filesystem, not ganesha: ext4 keeps all xattrs of
	# a file in one 4 KiB block (ENOSPC beyond), and a name is 255 bytes
	# with its "user." prefix.
	set(vfsxattr_stock /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so)
	if(EXISTS ${vfsxattr_stock})
		set(vfsxattr_plugin_dir ${CMAKE_CURRENT_BINARY_DIR}/vfsxattr-plugin)
		add_library(fsalvfs_xattr_test MODULE ${NGNFS_TEST_DIR}/fsal/vfsxattr/vfs_xattr.c)
		set_target_properties(fsalvfs_xattr_test PROPERTIES OUTPUT_NAME fsalvfs
				      LIBRARY_OUTPUT_DIRECTORY ${vfsxattr_plugin_dir})
		target_compile_definitions(fsalvfs_xattr_test PRIVATE _GNU_SOURCE __USE_GNU
					   _LARGEFILE64_SOURCE _FILE_OFFSET_BITS=64 HAS_DOFF NDEBUG)
		target_include_directories(fsalvfs_xattr_test SYSTEM PRIVATE
					   ${CMAKE_CURRENT_BINARY_DIR}/memxattr-include
					   ${GANESHA_SOURCE_DIR}/src/include
					   ${GANESHA_SOURCE_DIR}/src/include/os/linux
					   ${GANESHA_SOURCE_DIR}/src/FSAL
					   ${GANESHA_SOURCE_DIR}/src/FSAL/FSAL_VFS
					   ${GANESHA_SOURCE_DIR}/src/FSAL/Stackable_FSALs/FSAL_MDCACHE
					   /usr/include/ntirpc)
		target_compile_options(fsalvfs_xattr_test PRIVATE -fno-strict-aliasing
				       -fno-sanitize=all)
		target_link_options(fsalvfs_xattr_test PRIVATE -fno-sanitize=all -Wl,--no-undefined)
		target_link_libraries(fsalvfs_xattr_test PRIVATE ${vfsxattr_stock}
				      /usr/lib/ganesha/libganesha_nfsd.so.4.3 ${CMAKE_DL_LIBS})
		add_dependencies(test_nfs42_xattr fsalvfs_xattr_test)
		add_test(NAME fsal-tools.nfs42_xattr_vfsxattr_functional
			 COMMAND test_nfs42_xattr --expect supported --plugins-dir ${vfsxattr_plugin_dir}
				 --fsal-block "FSAL { Name = VFS; }" --local-xattrs
				 --max-value-size 2048 --no-value-limit --list-names 40
				 --max-name-length 250)
		set_tests_properties(fsal-tools.nfs42_xattr_vfsxattr_functional PROPERTIES
				     TIMEOUT 60 LABELS fsal-tools
				     ENVIRONMENT "${nfs_tools_environment}")
	endif()
else()
	message(STATUS "ctest/fsal-tools.cmake: NGNFS_BUILD_FSAL is OFF: no MEM/VFS+xattr reference "
		"plugins, functional xattr tests not registered")
endif()

# The functional xattr tests against our own plugin, on a one-device
# blockd cluster formatted by the admin tool.  FSAL_NGNFS stores the name
# with its "user." prefix within NGNFS_XATTR_NAME_MAX (255), so 250 bytes
# is the longest name on the wire.  -DNGNFS_TEST_FSAL_NGNFS_XATTRS=OFF
# leaves it registered but disabled.
option(NGNFS_TEST_FSAL_NGNFS_XATTRS "Run the NFSv4.2 xattr tests against FSAL_NGNFS" ON)
if(TARGET fsalngnfs)
	ngnfs_add_cluster_test(NAME fsal-tools.nfs42_xattr_ngnfs_functional
		COMMAND test_nfs42_xattr --expect supported --plugins-dir ${NGNFS_FSAL_PLUGIN_DIR}
			--ngnfs-devices 1 --max-value-size 8191 --max-name-length 250
			--tool $<TARGET_FILE:nfs_xattr_tool>
		TIMEOUT 120 ENVIRONMENT ${nfs_tools_environment} LABELS fsal-tools)
	if(NOT NGNFS_TEST_FSAL_NGNFS_XATTRS)
		set_tests_properties(fsal-tools.nfs42_xattr_ngnfs_functional PROPERTIES DISABLED TRUE)
	endif()
endif()

foreach(fsal VFS MEM)
	string(TOLOWER ${fsal} name)
	add_test(NAME fsal-tools.nfs42_xattr_${name}_unsupported
		 COMMAND test_nfs42_xattr --expect unsupported
			 --fsal-block "FSAL { Name = ${fsal}; }" --tool $<TARGET_FILE:nfs_xattr_tool>)
	set_tests_properties(fsal-tools.nfs42_xattr_${name}_unsupported PROPERTIES
			     TIMEOUT 60 LABELS fsal-tools
			     ENVIRONMENT "${nfs_tools_environment}")
endforeach()

add_test(NAME fsal-tools.ganesha_harness COMMAND test_ganesha_harness)
set_tests_properties(fsal-tools.ganesha_harness PROPERTIES TIMEOUT 90 LABELS fsal-tools
		     ENVIRONMENT "${nfs_tools_environment}")
