// io/video.hpp in a build without FFmpeg's libraries (STEPMIX_VIDEO=OFF, or
// AUTO without them): every video operation is an error that says so, and
// output_format_for refuses .mp4 outputs before any work.
#include "io/video.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

[[noreturn]] void without_video(const std::string& what) {
  throw Error("video", what + ": " + kBuiltWithoutVideo);
}

}  // namespace

struct Mp4Writer::State {};

Mp4Writer::Mp4Writer(const std::string& path, int, int, double) { without_video(path); }
Mp4Writer::~Mp4Writer() = default;
void Mp4Writer::add_frame(const Image8&) { without_video("MP4 output"); }
std::string Mp4Writer::finish() { without_video("MP4 output"); }
int64_t Mp4Writer::frames() const { return 0; }

VideoInfo probe_video(const std::string& path) { without_video(path); }
Image8 read_video_frame(const std::string& path, int64_t) { without_video(path); }

std::string video_unavailable() { return kBuiltWithoutVideo; }
bool video_built() { return false; }

}  // namespace stepmix
