// Olio site behaviour (nearnative apps/olio), on Prototype and script.aculo.us.
var Olio = {
  // attend fetches addAttendee.php in the background and shows the new list.
  attend: function (link) {
    new Ajax.Updater('attendees', link.href, { method: 'get' });
    Effect.Highlight('attendees');
    return false;
  },
  // tagComplete offers the tags of the cloud while the user types.
  tagComplete: function (field) {
    var tags = $$('#tagcloud a').map(function (a) { return a.innerHTML; });
    new Autocompleter.Local(field, 'tagchoices', tags, { partialSearch: true });
  }
};
document.observe('dom:loaded', function () {
  var a = $('attend');
  if (a) { a.observe('click', function (e) { e.stop(); Olio.attend(a); }); }
});
