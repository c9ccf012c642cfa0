# Tests of file data (libcore/data.c) and extended attributes
# (libcore/xattr.c).  The "tools" area file holds them because ctest/fs.cmake
# belongs to the namespace tests; the sources are under ctest/data/.
#
#   data.fake     test_data over an in-memory test double of txn.h
#                 (ctest/data/fake_txn.c) that injects -EAGAIN and counts
#                 allocations, frees, live blocks per device and dirty set
#                 sizes: contents byte for byte, holes, 1 TiB offsets,
#                 truncate, accounting, spread, bounded transactions.
#   xattr.fake    test_xattr over the same double: setxattr(2) semantics,
#                 limits, 2000 xattrs, inline/overflow moves, one-block
#                 updates, corruption, randomized against a reference.
#   data.cluster  the native API (ngnfs_mkfs, ngnfs_mount, ngnfs_write,
#                 ngnfs_setxattr...) against real blockd processes started
#                 through ctest/harness/cluster.h.
#
# The double replaces txn.c, so the test library compiles data.c and
# xattr.c with the filesystem files they call into (inode.c for inode
# checks, dir.c and btree.c which inode.c's free path reaches) instead of
# linking ngnfs_core; test_support.c stands in for fs.c's error reporting.

set(NGNFS_CORE_DIR ${CMAKE_SOURCE_DIR}/libcore)

add_library(ngnfs_test_data_fake STATIC
	    ${NGNFS_CORE_DIR}/data.c ${NGNFS_CORE_DIR}/xattr.c ${NGNFS_CORE_DIR}/inode.c
	    ${NGNFS_CORE_DIR}/dir.c ${NGNFS_CORE_DIR}/btree.c
	    ${NGNFS_TEST_DIR}/data/fake_txn.c ${NGNFS_TEST_DIR}/data/test_util.c
	    ${NGNFS_TEST_DIR}/data/test_support.c)
target_include_directories(ngnfs_test_data_fake PUBLIC ${NGNFS_CORE_DIR} ${NGNFS_TEST_DIR}/data)
target_link_libraries(ngnfs_test_data_fake PUBLIC PkgConfig::XXHASH Threads::Threads)

add_executable(test_data ${NGNFS_TEST_DIR}/data/test_data.c)
target_link_libraries(test_data PRIVATE ngnfs_test_data_fake PkgConfig::CMOCKA)
add_test(NAME data.fake COMMAND test_data)
set_tests_properties(data.fake PROPERTIES TIMEOUT 120 LABELS data)

add_executable(test_xattr ${NGNFS_TEST_DIR}/data/test_xattr.c)
target_link_libraries(test_xattr PRIVATE ngnfs_test_data_fake PkgConfig::CMOCKA)
add_test(NAME xattr.fake COMMAND test_xattr)
set_tests_properties(xattr.fake PROPERTIES TIMEOUT 120 LABELS data)

add_executable(test_data_cluster ${NGNFS_TEST_DIR}/data/test_data_cluster.c)
target_link_libraries(test_data_cluster PRIVATE ngnfs_core ngnfs_test_harness PkgConfig::CMOCKA
		      Threads::Threads)
ngnfs_add_cluster_test(NAME data.cluster COMMAND test_data_cluster TIMEOUT 150 LABELS data)
