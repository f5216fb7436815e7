// FFmpeg's libraries opened with dlopen at first use (ffmpeg_library.hpp says why).
#include "io/ffmpeg_library.hpp"

#include "core/dynamic_library.hpp"

namespace stepmix::detail {
namespace {

#define STEPMIX_TEXT(x) #x
#define STEPMIX_SONAME(library, major) "lib" library ".so." STEPMIX_TEXT(major)

// The Debian packages that hold the runtime libraries, for the advice.
const std::string kFfmpegAdvice =
    "install FFmpeg's libraries (Debian: libavutil" + std::to_string(LIBAVUTIL_VERSION_MAJOR) + " libavcodec" +
    std::to_string(LIBAVCODEC_VERSION_MAJOR) + " libavformat" + std::to_string(LIBAVFORMAT_VERSION_MAJOR) +
    " libswscale" + std::to_string(LIBSWSCALE_VERSION_MAJOR) + "), or put their folder on LD_LIBRARY_PATH";

// The folders pkg-config found the libraries in at configure time
// (CMakeLists.txt); "" where it knew none.
#ifndef STEPMIX_AVUTIL_DIR
#define STEPMIX_AVUTIL_DIR ""
#define STEPMIX_AVCODEC_DIR ""
#define STEPMIX_AVFORMAT_DIR ""
#define STEPMIX_SWSCALE_DIR ""
#endif

}  // namespace

FfmpegCandidates ffmpeg_sonames() {
  return {soname_then_folder(STEPMIX_SONAME("avutil", LIBAVUTIL_VERSION_MAJOR), STEPMIX_AVUTIL_DIR),
          soname_then_folder(STEPMIX_SONAME("avcodec", LIBAVCODEC_VERSION_MAJOR), STEPMIX_AVCODEC_DIR),
          soname_then_folder(STEPMIX_SONAME("avformat", LIBAVFORMAT_VERSION_MAJOR), STEPMIX_AVFORMAT_DIR),
          soname_then_folder(STEPMIX_SONAME("swscale", LIBSWSCALE_VERSION_MAJOR), STEPMIX_SWSCALE_DIR)};
}
#undef STEPMIX_SONAME
#undef STEPMIX_TEXT

FfmpegLibrary open_ffmpeg(const FfmpegCandidates& candidates) {
  FfmpegLibrary library;
  // Each library fills its own members of the one table; a library that
  // fails leaves nothing half-filled behind, since the table is discarded.
  const auto open = [&library](const std::vector<std::string>& files, const char* what, auto resolve) {
    library.paths.push_back(open_first_library(
        "video", files,
        [&](const SymbolLookup& lookup) {
          std::string missing;
          resolve(lookup, missing);
          return missing;
        },
        what, kFfmpegAdvice));
  };
  open(candidates.avutil, "FFmpeg's libavutil",
       [&](const SymbolLookup& lookup, std::string& missing) { STEPMIX_AVUTIL_ENTRY_POINTS(STEPMIX_LOOK_UP) });
  open(candidates.avcodec, "FFmpeg's libavcodec",
       [&](const SymbolLookup& lookup, std::string& missing) { STEPMIX_AVCODEC_ENTRY_POINTS(STEPMIX_LOOK_UP) });
  open(candidates.avformat, "FFmpeg's libavformat",
       [&](const SymbolLookup& lookup, std::string& missing) { STEPMIX_AVFORMAT_ENTRY_POINTS(STEPMIX_LOOK_UP) });
  open(candidates.swscale, "FFmpeg's libswscale",
       [&](const SymbolLookup& lookup, std::string& missing) { STEPMIX_SWSCALE_ENTRY_POINTS(STEPMIX_LOOK_UP) });
  return library;
}

const FfmpegLibrary& ffmpeg() {
  return open_once<FfmpegLibrary>([] {
    FfmpegLibrary library = open_ffmpeg(ffmpeg_sonames());
    library.av_log_set_level(AV_LOG_QUIET);
    return library;
  });
}

}  // namespace stepmix::detail
