// How the video code opens FFmpeg's libraries (src/io/ffmpeg_library.hpp): at
// the first video, by dlopen of the sonames the build compiled against,
// rather than linked. That a run without video never loads them is checked
// on the CLI (tests/tools/generate_vae.sh).
#include "io/ffmpeg_library.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "common/error_of.hpp"
#include "io/video.hpp"

namespace stepmix::test {
namespace {

using detail::ffmpeg;
using detail::ffmpeg_sonames;
using detail::FfmpegCandidates;
using detail::FfmpegLibrary;
using detail::open_ffmpeg;

TEST(FfmpegLibrary, TheSystemsLibrariesOpenWithEveryEntryPoint) {
  const FfmpegLibrary& av = ffmpeg();
  ASSERT_EQ(av.paths.size(), 4u);
  EXPECT_EQ(av.paths[0], "libavutil.so." + std::to_string(LIBAVUTIL_VERSION_MAJOR));
  EXPECT_EQ(av.paths[1], "libavcodec.so." + std::to_string(LIBAVCODEC_VERSION_MAJOR));
  EXPECT_EQ(av.paths[2], "libavformat.so." + std::to_string(LIBAVFORMAT_VERSION_MAJOR));
  EXPECT_EQ(av.paths[3], "libswscale.so." + std::to_string(LIBSWSCALE_VERSION_MAJOR));
#define STEPMIX_EXPECT_RESOLVED(name) EXPECT_NE(av.name, nullptr) << #name;
  STEPMIX_AVUTIL_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
  STEPMIX_AVCODEC_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
  STEPMIX_AVFORMAT_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
  STEPMIX_SWSCALE_ENTRY_POINTS(STEPMIX_EXPECT_RESOLVED)
#undef STEPMIX_EXPECT_RESOLVED
  // Calls into the libraries.
  EXPECT_STREQ(av.avcodec_get_name(AV_CODEC_ID_H264), "h264");
  EXPECT_STREQ(av.av_get_pix_fmt_name(AV_PIX_FMT_YUV420P), "yuv420p");
  // Opened once: every call answers the same table, and video works.
  EXPECT_EQ(&ffmpeg(), &av);
  EXPECT_EQ(video_unavailable(), "");
}

TEST(FfmpegLibrary, EachIsLookedForByItsSonameThenInTheFolderTheBuildFoundItIn) {
  const FfmpegCandidates sonames = ffmpeg_sonames();
  FfmpegCandidates folders_only;
  for (const auto& [list, folder_only] : {std::pair{&sonames.avutil, &folders_only.avutil},
                                          std::pair{&sonames.avcodec, &folders_only.avcodec},
                                          std::pair{&sonames.avformat, &folders_only.avformat},
                                          std::pair{&sonames.swscale, &folders_only.swscale}}) {
    ASSERT_EQ(list->size(), 2u) << list->front();
    const std::string& in_folder = (*list)[1];
    EXPECT_EQ(in_folder.front(), '/') << in_folder;
    EXPECT_EQ(in_folder.substr(in_folder.size() - list->front().size() - 1), "/" + list->front());
    folder_only->push_back(in_folder);
  }
  // The folders alone open them: an FFmpeg the loader does not search still works.
  const FfmpegLibrary av = open_ffmpeg(folders_only);
  EXPECT_EQ(av.paths[1], sonames.avcodec[1]);
  EXPECT_STREQ(av.avcodec_get_name(AV_CODEC_ID_H264), "h264");
}

TEST(FfmpegLibrary, AMissingLibraryIsOneErrorNamingTheLibraryEveryFileTriedAndThePackages) {
  FfmpegCandidates candidates = ffmpeg_sonames();
  candidates.avcodec = {"libstepmix-no-such-library.so.59", "/nonexistent/libavcodec.so.59"};
  const std::string message = error_of([&] { open_ffmpeg(candidates); });
  EXPECT_EQ(message.rfind("[video] FFmpeg's libavcodec: no usable library (", 0), 0u) << message;
  EXPECT_NE(message.find("libstepmix-no-such-library.so.59: cannot open shared object file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("/nonexistent/libavcodec.so.59: cannot open shared object file"), std::string::npos)
      << message;
  EXPECT_NE(message.find("install FFmpeg's libraries (Debian: libavutil" + std::to_string(LIBAVUTIL_VERSION_MAJOR) +
                         " libavcodec" + std::to_string(LIBAVCODEC_VERSION_MAJOR)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("LD_LIBRARY_PATH"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(FfmpegLibrary, ALibraryWithoutTheEntryPointsIsRefusedAndTheNextTried) {
  // zlib: on every machine that builds stepmix (zlib1g, a build dependency).
  FfmpegCandidates candidates = ffmpeg_sonames();
  candidates.swscale = {"libz.so.1"};
  const std::string message = error_of([&] { open_ffmpeg(candidates); });
  EXPECT_NE(message.find("[video] FFmpeg's libswscale: no usable library (libz.so.1: lacks sws_getContext, "
                         "sws_scale, sws_freeContext)"),
            std::string::npos)
      << message;
  candidates.swscale = {"libz.so.1", ffmpeg_sonames().swscale.front()};
  const FfmpegLibrary av = open_ffmpeg(candidates);
  EXPECT_EQ(av.paths.back(), ffmpeg_sonames().swscale.front());
  EXPECT_EQ(av.sws_scale, ffmpeg().sws_scale);
}

}  // namespace
}  // namespace stepmix::test
