# Cross-compiles the native core for 64-bit ARM with Debian's g++-aarch64-linux-gnu:
#   cmake -S . -B build/arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# Highway and GoogleTest are Debian's arm64 multiarch packages (libhwy-dev:arm64,
# libgtest-dev:arm64; scripts/setup_arm.sh installs them). Their CMake configs in
# /usr/lib/aarch64-linux-gnu/cmake are found through CMAKE_LIBRARY_ARCHITECTURE,
# which CMake takes from the compiler, so no sysroot or find-root path is needed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Test binaries (gtest_discover_tests, ctest) run under qemu-user. Its default
# aarch64 CPU is `max` (NEON, SVE, SVE2, 512-bit SVE vectors); no `-cpu` here so
# that QEMU_CPU can choose the SVE vector length (scripts/test_arm.sh sweeps it).
# No `-L /usr/aarch64-linux-gnu` either: the binaries load libhwy from the
# multiarch tree, whose libc6:arm64 must come with its own dynamic loader
# (/lib/ld-linux-aarch64.so.1); the cross toolchain's older loader with that
# libc hangs in pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
