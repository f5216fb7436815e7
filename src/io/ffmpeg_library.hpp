// Private to io/video.cpp: FFmpeg's libraries (libavutil, libavcodec,
// libavformat, libswscale), opened with dlopen when the first video is
// written or read rather than linked. Linked, they load some 130 shared
// libraries (every codec, muxer and protocol FFmpeg was built with) into
// every run of every program: about 60 ms of each start, for the CLI and for
// each test process, most of which never touch a video. Opened here, only a
// run with an MP4 output or input loads them, and a machine without them
// still runs everything else; an .mp4 output is then refused up front with
// the loader's reason (io/output_format.cpp).
//
// The table's members have FFmpeg's names and types (from the headers the
// build compiled against), so a call reads av.avcodec_open2(...). The files
// opened are the sonames of those headers' major versions (libavcodec.so.59
// for FFmpeg 5.1), the ABI FFmpeg keeps within a major version: through the
// loader's search (LD_LIBRARY_PATH, its cache), then in the folder the build
// found each library in.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include <string>
#include <vector>

// Every entry point io/video.cpp calls, by library.
#define STEPMIX_AVUTIL_ENTRY_POINTS(X) \
  X(av_log_set_level)                  \
  X(av_strerror)                       \
  X(av_malloc)                         \
  X(av_free)                           \
  X(av_freep)                          \
  X(av_d2q)                            \
  X(av_dict_set)                       \
  X(av_dict_free)                      \
  X(av_get_pix_fmt_name)               \
  X(av_frame_alloc)                    \
  X(av_frame_free)                     \
  X(av_frame_get_buffer)               \
  X(av_frame_make_writable)

#define STEPMIX_AVCODEC_ENTRY_POINTS(X) \
  X(avcodec_find_encoder_by_name)       \
  X(avcodec_find_encoder)               \
  X(avcodec_get_name)                   \
  X(avcodec_alloc_context3)             \
  X(avcodec_free_context)               \
  X(avcodec_open2)                      \
  X(avcodec_parameters_from_context)    \
  X(avcodec_parameters_to_context)      \
  X(avcodec_send_frame)                 \
  X(avcodec_receive_packet)             \
  X(avcodec_send_packet)                \
  X(avcodec_receive_frame)              \
  X(av_packet_alloc)                    \
  X(av_packet_free)                     \
  X(av_packet_unref)                    \
  X(av_packet_rescale_ts)

#define STEPMIX_AVFORMAT_ENTRY_POINTS(X) \
  X(avformat_alloc_output_context2)      \
  X(avformat_new_stream)                 \
  X(avformat_write_header)               \
  X(av_interleaved_write_frame)          \
  X(av_write_trailer)                    \
  X(avformat_free_context)               \
  X(avformat_open_input)                 \
  X(avformat_find_stream_info)           \
  X(av_find_best_stream)                 \
  X(av_read_frame)                       \
  X(avformat_close_input)                \
  X(avio_alloc_context)                  \
  X(avio_context_free)                   \
  X(avio_flush)

#define STEPMIX_SWSCALE_ENTRY_POINTS(X) \
  X(sws_getContext)                     \
  X(sws_scale)                          \
  X(sws_freeContext)

namespace stepmix::detail {

struct FfmpegLibrary {
#define STEPMIX_FFMPEG_MEMBER(name) decltype(&::name) name = nullptr;
  STEPMIX_AVUTIL_ENTRY_POINTS(STEPMIX_FFMPEG_MEMBER)
  STEPMIX_AVCODEC_ENTRY_POINTS(STEPMIX_FFMPEG_MEMBER)
  STEPMIX_AVFORMAT_ENTRY_POINTS(STEPMIX_FFMPEG_MEMBER)
  STEPMIX_SWSCALE_ENTRY_POINTS(STEPMIX_FFMPEG_MEMBER)
#undef STEPMIX_FFMPEG_MEMBER
  std::vector<std::string> paths;  // the files opened: libavutil, libavcodec, libavformat, libswscale
};

// Where each of the four is looked for: names dlopen searches for, or paths.
struct FfmpegCandidates {
  std::vector<std::string> avutil, avcodec, avformat, swscale;
};

// The sonames of the FFmpeg the build compiled against, each followed by the
// same file in the folder pkg-config found it in at configure time.
FfmpegCandidates ffmpeg_sonames();

// The four libraries, opened on the first call (thread-safe) and kept open
// for the life of the process, with FFmpeg's own log lines silenced (x264's
// settings banner would break the CLI's one-line output; errors reach the
// caller as exceptions). Throws Error("video", "FFmpeg's <library>: no usable
// library (<each file tried and why>); <advice>"); the next call tries again.
const FfmpegLibrary& ffmpeg();

// Opens the first usable candidate of each library, in the order avutil,
// avcodec, avformat, swscale. What ffmpeg() does with ffmpeg_sonames(); the
// tests give it other lists.
FfmpegLibrary open_ffmpeg(const FfmpegCandidates& candidates);

}  // namespace stepmix::detail
