// One way the page writes times: the browser's own time zone, always named, so the list,
// the detail and the charts read alike and a time copied out of the page says which zone
// it is in ("2026-12-02 09:27:37 UTC+9").
"use strict";

// In a function of its own: the page's scripts share one global scope, and app.js has a
// `when` of its own.
(() => {
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  const two = (n) => String(n).padStart(2, "0");

  // The zone of `date` in this browser, as an offset from UTC: "UTC", "UTC+9", "UTC-3:30".
  function zone(date) {
    const offset = -date.getTimezoneOffset();
    if (offset === 0) return "UTC";
    const hours = Math.floor(Math.abs(offset) / 60);
    const minutes = Math.abs(offset) % 60;
    return `UTC${offset < 0 ? "-" : "+"}${hours}${minutes ? ":" + two(minutes) : ""}`;
  }

  // A full time with its zone; "" for none (a job not started yet).
  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (Number.isNaN(d.getTime())) return String(iso);
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
      `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())} ${zone(d)}`;
  }

  // A chart axis label: the clock, and for a view that spans days, the day too ("Dec 2 09:00").
  function clock(iso, withDay) {
    const d = new Date(iso);
    const time = `${two(d.getHours())}:${two(d.getMinutes())}`;
    return withDay ? `${MONTHS[d.getMonth()]} ${d.getDate()} ${time}` : time;
  }

  window.tickqTime = { when, clock, zone };
})();
