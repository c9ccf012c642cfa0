# Benchmarks of the NFS gateway: bench/fsal/nfs_bench.c runs the same NFS
# workloads (libnfs, NFSv4) against ganesha.nfsd with FSAL_VFS, FSAL_MEM
# and, when given its plugin and FSAL block, FSAL_NGNFS, and prints a table
# with the NGNFS/MEM and NGNFS/VFS ratios; --rss N samples the daemon's
# peak resident memory; bench/fsal/nfs_op_latency.c splits one connection's
# time by operation on a running gateway.  Built, never registered with
# ctest.  Figures and the commands that produced them: docs/performance.md,
# "NFS gateway".
if(NOT LIBNFS_FOUND OR NOT TARGET ngnfs_nfs_test_tools)
	message(STATUS "bench/fsal.cmake: libnfs or the NFS test tools missing; nfs_bench not built")
	return()
endif()

add_executable(nfs_bench ${CMAKE_CURRENT_SOURCE_DIR}/fsal/nfs_bench.c)
target_link_libraries(nfs_bench PRIVATE ngnfs_nfs_test_tools PkgConfig::LIBNFS Threads::Threads)
# --ngnfs-devices starts blockd through the shared test harness and formats
# it with the admin tool; tell the program where this build put them.
target_link_libraries(nfs_bench PRIVATE ngnfs_nfs_ngnfs_backend)
if(TARGET blockd)
	target_compile_definitions(nfs_bench PRIVATE NGNFS_BENCH_BLOCKD="$<TARGET_FILE:blockd>")
endif()
if(TARGET ngnfs)
	target_compile_definitions(nfs_bench PRIVATE NGNFS_BENCH_TOOL="$<TARGET_FILE:ngnfs>")
endif()

# nfs_op_latency: one connection's mean latency per operation (create,
# write, close with its COMMIT, rename, unlink) against a running gateway.
add_executable(nfs_op_latency ${CMAKE_CURRENT_SOURCE_DIR}/fsal/nfs_op_latency.c)
target_link_libraries(nfs_op_latency PRIVATE PkgConfig::LIBNFS)
